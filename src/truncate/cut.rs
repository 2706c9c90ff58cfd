//! The pure part: splitting on character boundaries, truncating with a marker, summarising JSON.

use serde_json::Value;

/// The largest index `<= at` that is a character boundary of `text`.
pub(crate) fn floor_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    let mut at = at;
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The end of the next piece of `text[start..]` of at most `max` bytes, never inside a character
/// (a character longer than `max` makes a piece of its own).
pub(crate) fn next_piece_end(text: &str, start: usize, max: usize) -> usize {
    let end = floor_boundary(text, start.saturating_add(max));
    if end > start {
        return end;
    }
    // One character wider than `max`: take it whole.
    text[start..]
        .char_indices()
        .nth(1)
        .map_or(text.len(), |(i, _)| start + i)
}

/// `1.2 MiB`, `340 KiB`, `900 B`.
pub(crate) fn human_size(bytes: usize) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b >= KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{bytes} B")
    }
}

/// `text` cut to at most `max` bytes, marker included, on a character boundary; `None` if it
/// fits already. The marker says how much of what was cut: `[truncated: 1.2 MiB of JSON]`.
pub(crate) fn truncate(text: &str, max: usize, what: &str) -> Option<String> {
    if text.len() <= max {
        return None;
    }
    // The marker's size depends on how much is cut, which depends on the marker's size: the cut
    // part only grows as the kept part shrinks, so two rounds settle it.
    let mut keep = max;
    let mut marker = String::new();
    for _ in 0..3 {
        marker = format!("\n[truncated: {} of {what}]", human_size(text.len() - keep));
        keep = floor_boundary(text, max.saturating_sub(marker.len()));
    }
    let mut out = String::with_capacity(keep + marker.len());
    out.push_str(&text[..keep]);
    out.push_str(&marker);
    Some(out)
}

/// A one-paragraph description of a JSON value: its type and, for objects, the top-level keys
/// with the type (and length) of each value.
pub(crate) fn summarize(value: &Value, total_bytes: usize) -> String {
    fn shape(v: &Value) -> String {
        match v {
            Value::Null => "null".to_owned(),
            Value::Bool(_) => "boolean".to_owned(),
            Value::Number(_) => "number".to_owned(),
            Value::String(s) => format!("string of {}", human_size(s.len())),
            Value::Array(items) => format!("array of {} items", items.len()),
            Value::Object(map) => format!("object with {} keys", map.len()),
        }
    }
    let size = human_size(total_bytes);
    match value {
        Value::Object(map) => {
            let keys: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}: {}", shape(v)))
                .collect();
            format!(
                "[summarized: {size} of JSON, an object with keys {{{}}}]",
                keys.join(", ")
            )
        }
        other => format!("[summarized: {size} of JSON, {}]", shape(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn marker_says_what_was_cut() {
        let text = "x".repeat(2 * 1024 * 1024);
        let cut = truncate(&text, 1000, "JSON").unwrap();
        assert!(cut.len() <= 1000);
        assert!(
            cut.ends_with("[truncated: 2.0 MiB of JSON]"),
            "{}",
            &cut[cut.len() - 40..]
        );
    }

    #[test]
    fn summary_lists_top_level_keys() {
        let value = serde_json::json!({"rows": [1, 2, 3], "name": "x", "meta": {"a": 1}});
        let summary = summarize(&value, 5000);
        assert!(summary.contains("rows: array of 3 items"), "{summary}");
        assert!(summary.contains("meta: object with 1 keys"), "{summary}");
        assert!(summary.contains("4.9 KiB"), "{summary}");
    }

    proptest! {
        #[test]
        fn pieces_concatenate_back_and_stay_small(text in "\\PC{0,200}", max in 1usize..40) {
            let mut start = 0;
            let mut pieces = Vec::new();
            while start < text.len() {
                let end = next_piece_end(&text, start, max);
                let piece = &text[start..end];
                let one_char = piece.chars().count() == 1;
                prop_assert!(piece.len() <= max || one_char, "{piece:?} > {max}");
                pieces.push(piece);
                start = end;
            }
            prop_assert_eq!(pieces.concat(), text);
        }

        #[test]
        fn truncation_fits_and_is_idempotent(text in "\\PC{0,400}", max in 64usize..300) {
            match truncate(&text, max, "text") {
                None => prop_assert!(text.len() <= max),
                Some(cut) => {
                    prop_assert!(cut.len() <= max, "{} > {max}", cut.len());
                    prop_assert!(truncate(&cut, max, "text").is_none(), "cutting twice changes nothing");
                    let kept = cut.rsplit_once("\n[truncated: ").unwrap().0;
                    prop_assert!(text.starts_with(kept));
                }
            }
        }
    }
}
