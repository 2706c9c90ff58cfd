//! How a run's events are stored: in chunks, one row per write rather than one per event.
//!
//! A chunk is a run's consecutive events `first..=last`, one line each (compact JSON has no
//! newline of its own). The first line is the first event's JSON; every other line is
//! `N:rest`, the event being the first `N` bytes of the one before it followed by `rest`
//! (front coding). A write of a batch of 300 tokens is one row, one B-tree insert, one
//! primary-key entry, instead of 300 of each, and the tokens, which repeat all but their delta
//! (`{"type":"TEXT_MESSAGE_CONTENT","messageId":"…","delta":"`), are stored in a tenth of their
//! bytes. An event whose JSON does hold a newline (a log written by another program, say) is a
//! chunk of its own, whole.

use std::fmt::Write as _;

use bytes::Bytes;

use crate::{id::RunId, runs::LoggedEvent};

/// The most events one chunk holds. A reader looking for the events after `after` knows that a
/// chunk holding one of them starts after `after - MAX_EVENTS`: its index range is bounded.
pub(super) const MAX_EVENTS: u64 = 512;

/// One row of `run_chunks`.
#[derive(Debug)]
pub(super) struct Chunk {
    pub(super) run: RunId,
    pub(super) first: u64,
    pub(super) last: u64,
    pub(super) events: String,
}

/// Appends `events` of `run`, in order, to `chunks`: a new chunk wherever the sequence numbers
/// jump, a chunk is full, or an event's JSON holds a newline.
pub(super) fn cut(run: &RunId, events: &[LoggedEvent], chunks: &mut Vec<Chunk>) {
    let mut open: Option<Chunk> = None;
    let mut previous = "";
    for event in events {
        let json = event.json_str();
        let whole = json.contains('\n');
        if let Some(chunk) = &mut open {
            if !whole && chunk.last + 1 == event.seq && chunk.last - chunk.first + 1 < MAX_EVENTS {
                let shared = shared_prefix(previous, json);
                chunk.last = event.seq;
                // Writing to a `String` cannot fail.
                let _ = write!(chunk.events, "\n{shared}:{}", &json[shared..]);
                previous = json;
                continue;
            }
            chunks.extend(open.take());
        }
        let chunk = Chunk {
            run: run.clone(),
            first: event.seq,
            last: event.seq,
            events: json.to_owned(),
        };
        if whole {
            chunks.push(chunk);
        } else {
            open = Some(chunk);
            previous = json;
        }
    }
    chunks.extend(open);
}

/// How many leading bytes `b` shares with `a`, backed off to a character boundary.
fn shared_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !b.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// The events of a chunk read back; `None` when its text is not `last - first + 1` events
/// written by [`cut`].
pub(super) fn split(first: u64, last: u64, text: String) -> Option<Vec<LoggedEvent>> {
    let bytes = Bytes::from(text);
    if first == last {
        return Some(vec![LoggedEvent::from_json(first, bytes)]);
    }
    let count = usize::try_from(last.checked_sub(first)? + 1).ok()?;
    let mut lines = bytes.split(|b| *b == b'\n');
    let head = lines.next()?;
    let mut previous = bytes.slice_ref(head);
    let mut events = Vec::with_capacity(count);
    events.push(LoggedEvent::from_json(first, previous.clone()));
    for line in lines {
        let colon = line.iter().position(|b| *b == b':')?;
        let shared: usize = std::str::from_utf8(&line[..colon]).ok()?.parse().ok()?;
        let mut json = Vec::with_capacity(shared + line.len() - colon - 1);
        json.extend_from_slice(previous.get(..shared)?);
        json.extend_from_slice(&line[colon + 1..]);
        previous = Bytes::from(json);
        events.push(LoggedEvent::from_json(
            first + events.len() as u64,
            previous.clone(),
        ));
    }
    (events.len() == count).then_some(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, json: &str) -> LoggedEvent {
        LoggedEvent::from_json(seq, json.to_owned())
    }

    fn texts(events: &[LoggedEvent]) -> Vec<(u64, &str)> {
        events.iter().map(|e| (e.seq, e.json_str())).collect()
    }

    #[test]
    fn consecutive_events_are_one_chunk_and_read_back_as_written() {
        let run = RunId::from("r");
        let events = [
            event(3, r#"{"a":1}"#),
            event(4, "{}"),
            event(5, r#"{"b":"x"}"#),
        ];
        let mut chunks = Vec::new();
        cut(&run, &events, &mut chunks);
        assert_eq!(chunks.len(), 1);
        let Chunk {
            first,
            last,
            events: text,
            ..
        } = chunks.pop().unwrap();
        assert_eq!((first, last), (3, 5));
        let read = split(first, last, text).expect("three events");
        assert_eq!(texts(&read), texts(&events));
    }

    #[test]
    fn a_jump_a_full_chunk_or_a_newline_starts_another() {
        let run = RunId::from("r");
        let mut events: Vec<_> = (1..=MAX_EVENTS + 2).map(|s| event(s, "{}")).collect();
        events.push(event(MAX_EVENTS + 5, "{}"));
        events.push(event(MAX_EVENTS + 6, "{\n}"));
        events.push(event(MAX_EVENTS + 7, "{}"));
        let mut chunks = Vec::new();
        cut(&run, &events, &mut chunks);
        let ranges: Vec<_> = chunks.iter().map(|c| (c.first, c.last)).collect();
        let m = MAX_EVENTS;
        assert_eq!(
            ranges,
            [
                (1, m),
                (m + 1, m + 2),
                (m + 5, m + 5),
                (m + 6, m + 6),
                (m + 7, m + 7)
            ]
        );
        let read: Vec<_> = chunks
            .into_iter()
            .flat_map(|c| split(c.first, c.last, c.events).unwrap())
            .collect();
        assert_eq!(texts(&read), texts(&events));
    }

    #[test]
    fn tokens_are_stored_as_what_differs_from_the_one_before() {
        let run = RunId::from("r");
        let token = |seq, delta: &str| {
            event(
                seq,
                &format!(
                    r#"{{"type":"TEXT_MESSAGE_CONTENT","messageId":"m-1","delta":"{delta}"}}"#
                ),
            )
        };
        // "é" and "è" share their first byte: the prefix stops before the character.
        let events = [
            token(1, "lorem "),
            token(2, "ipsum "),
            token(3, "é"),
            token(4, "è"),
        ];
        let mut chunks = Vec::new();
        cut(&run, &events, &mut chunks);
        let text = &chunks[0].events;
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(&lines[1..], ["58:ipsum \"}", "58:é\"}", "58:è\"}"]);
        let read = split(1, 4, chunks.remove(0).events).unwrap();
        assert_eq!(texts(&read), texts(&events));
    }

    #[test]
    fn a_chunk_that_does_not_hold_its_events_is_refused() {
        assert!(split(1, 3, "{}\n0:{}".to_owned()).is_none(), "too few");
        assert!(
            split(1, 2, "{}\n0:{}\n0:{}".to_owned()).is_none(),
            "too many"
        );
        assert!(split(2, 1, "{}".to_owned()).is_none(), "backwards");
        assert!(
            split(1, 2, "{}\n{}".to_owned()).is_none(),
            "no prefix length"
        );
        assert!(
            split(1, 2, "{}\n3:}".to_owned()).is_none(),
            "a prefix longer than the event"
        );
    }
}
