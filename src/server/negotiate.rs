//! Choosing the response format from `Accept`.

/// How a run's events are framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// `text/event-stream`: `data: <json>\n\n` per event.
    Sse,
    /// `application/x-ndjson`: one JSON event per line.
    Ndjson,
    /// `application/vnd.ag-ui.event+proto`: each `ag_ui.Event` after its 4-byte big-endian length
    /// (feature `proto`).
    #[cfg(feature = "proto")]
    Proto,
}

impl Format {
    /// The media type.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Sse => "text/event-stream",
            Self::Ndjson => "application/x-ndjson",
            #[cfg(feature = "proto")]
            Self::Proto => crate::agui::proto::MEDIA_TYPE,
        }
    }

    /// The format for an `Accept` header: protobuf or NDJSON only when the client ranks it
    /// strictly above `text/event-stream` (protobuf first), SSE otherwise (also without
    /// `Accept`, and on ties such as `*/*`).
    #[must_use]
    pub fn negotiate(accept: Option<&str>) -> Self {
        let Some(accept) = accept else {
            return Self::Sse;
        };
        let sse = quality(accept, "text/event-stream");
        #[cfg(feature = "proto")]
        if quality(accept, crate::agui::proto::MEDIA_TYPE) > sse {
            return Self::Proto;
        }
        if quality(accept, "application/x-ndjson") > sse {
            Self::Ndjson
        } else {
            Self::Sse
        }
    }
}

/// The quality `accept` gives `media_type`: the most specific matching range wins (RFC 9110).
pub(crate) fn quality(accept: &str, media_type: &str) -> f32 {
    let (kind, _) = media_type.split_once('/').unwrap_or((media_type, ""));
    let mut best: Option<(u8, f32)> = None;
    for range in accept.split(',') {
        let mut params = range.split(';');
        let range_type = params.next().unwrap_or("").trim().to_ascii_lowercase();
        // A weight is 0 to 1 (RFC 9110); one outside is "not acceptable", never a preference.
        let q = params
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .map_or(1.0, |q| if (0.0..=1.0).contains(&q) { q } else { 0.0 });
        let specificity = if range_type == media_type {
            3
        } else if range_type == format!("{kind}/*") {
            2
        } else if range_type == "*/*" {
            1
        } else {
            continue;
        };
        if best.is_none_or(|(s, _)| specificity > s) {
            best = Some((specificity, q));
        }
    }
    best.map_or(0.0, |(_, q)| q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_unless_ndjson_is_preferred() {
        assert_eq!(Format::negotiate(None), Format::Sse);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Sse);
        assert_eq!(Format::negotiate(Some("text/event-stream")), Format::Sse);
        assert_eq!(
            Format::negotiate(Some("application/x-ndjson")),
            Format::Ndjson
        );
        assert_eq!(
            Format::negotiate(Some("text/event-stream;q=0.5, application/x-ndjson")),
            Format::Ndjson
        );
        assert_eq!(
            Format::negotiate(Some("text/event-stream, application/x-ndjson")),
            Format::Sse
        );
    }

    #[cfg(feature = "proto")]
    #[test]
    fn protobuf_only_when_strictly_preferred() {
        let proto = "application/vnd.ag-ui.event+proto";
        assert_eq!(Format::negotiate(Some(proto)), Format::Proto);
        assert_eq!(
            Format::negotiate(Some(&format!("{proto}, text/event-stream;q=0.9"))),
            Format::Proto
        );
        assert_eq!(
            Format::negotiate(Some(&format!("text/event-stream, {proto}"))),
            Format::Sse
        );
        assert_eq!(
            Format::negotiate(Some(&format!("text/event-stream, {proto};q=0.5"))),
            Format::Sse
        );
        assert_eq!(
            Format::negotiate(Some("*/*")),
            Format::Sse,
            "acceptable is not preferred"
        );
    }

    #[test]
    fn the_most_specific_range_wins() {
        assert_eq!(
            quality("text/*;q=0.2, text/event-stream;q=0.9", "text/event-stream"),
            0.9
        );
        assert_eq!(quality("*/*;q=0.1", "application/x-ndjson"), 0.1);
        assert_eq!(quality("application/json", "text/event-stream"), 0.0);
        assert_eq!(quality("text/event-stream;q=-1", "text/event-stream"), 0.0);
        assert_eq!(quality("text/event-stream;q=NaN", "text/event-stream"), 0.0);
        assert_eq!(quality("text/event-stream;q=7", "text/event-stream"), 0.0);
    }

    #[test]
    fn a_weight_out_of_range_prefers_nothing() {
        assert_eq!(
            Format::negotiate(Some("text/event-stream;q=-1")),
            Format::Sse
        );
        assert_eq!(
            Format::negotiate(Some("application/x-ndjson;q=5, text/event-stream;q=0.5")),
            Format::Sse
        );
    }
}
