//! How a run's events are stored: in chunks, one row per write rather than one per event.
//!
//! A chunk is a run's consecutive events `first..=last`, their AG-UI JSON joined by newlines
//! (compact JSON has none of its own). A write of a batch of 300 tokens is one row, one B-tree
//! insert, one primary-key entry, instead of 300 of each; a reader slices the text it read
//! without copying or parsing it. An event whose JSON does hold a newline (a log written by
//! another program, say) is a chunk of its own, whole.

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
    for event in events {
        let json = event.json_str();
        let whole = json.contains('\n');
        if let Some(chunk) = &mut open {
            if !whole && chunk.last + 1 == event.seq && chunk.last - chunk.first + 1 < MAX_EVENTS {
                chunk.last = event.seq;
                chunk.events.push('\n');
                chunk.events.push_str(json);
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
        }
    }
    chunks.extend(open);
}

/// The events of a chunk read back; `None` when its text does not hold `last - first + 1`
/// events.
pub(super) fn split(first: u64, last: u64, text: String) -> Option<Vec<LoggedEvent>> {
    let bytes = Bytes::from(text);
    if first == last {
        return Some(vec![LoggedEvent::from_json(first, bytes)]);
    }
    let count = usize::try_from(last.checked_sub(first)? + 1).ok()?;
    let mut events = Vec::with_capacity(count);
    let mut start = 0;
    for (seq, end) in (first..=last).zip(
        bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(at, _)| at)
            .chain([bytes.len()]),
    ) {
        events.push(LoggedEvent::from_json(seq, bytes.slice(start..end)));
        start = end + 1;
    }
    (events.len() == count && start == bytes.len() + 1).then_some(events)
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
    fn a_chunk_that_does_not_hold_its_events_is_refused() {
        assert!(split(1, 3, "{}\n{}".to_owned()).is_none(), "too few");
        assert!(split(1, 2, "{}\n{}\n{}".to_owned()).is_none(), "too many");
        assert!(split(2, 1, "{}".to_owned()).is_none(), "backwards");
    }
}
