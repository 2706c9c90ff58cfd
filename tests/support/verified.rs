//! A run's log checked as one run: the official event rules (the verifier) and exactly one
//! terminal event.
#![allow(dead_code)]

use serde_json::Value;

/// The types of `log`'s events, once `log` (its `(id, event)` frames) is checked to be one
/// well-formed run with exactly one terminal event; `name` says which in a failure.
pub fn one_run<'a>(log: &'a [(String, Value)], name: &str) -> Vec<&'a str> {
    let types: Vec<&str> = log
        .iter()
        .map(|(_, e)| e["type"].as_str().unwrap())
        .collect();
    let ends = types
        .iter()
        .filter(|t| matches!(**t, "RUN_FINISHED" | "RUN_ERROR"))
        .count();
    assert_eq!(ends, 1, "{name}: {types:?}");
    let parsed: Vec<agent_tower::agui::Event> = log
        .iter()
        .map(|(_, e)| serde_json::from_value(e.clone()).unwrap())
        .collect();
    agent_tower::test_util::verify(&parsed).unwrap_or_else(|e| panic!("{name}: {e}"));
    types
}

/// The ids `log` (a run's `(id, event)` frames, from its first) is to have, in order: `{run}:1`,
/// `{run}:2`, …, each takeover numbered after every number the attempt before it could have sent
/// uncommitted. A takeover's write begins at its marker, or at the run's opening before the
/// marker when the log it continued did not hold the start (whichever the log's own numbers
/// say, where the events before the marker could be either).
pub fn ids_in_order(log: &[(String, Value)], run: &str) -> Vec<String> {
    let seq_of = |at: usize| -> u64 { log[at].0.rsplit(':').next().unwrap().parse().unwrap() };
    let mut begins = std::collections::HashSet::new();
    for (marker, _) in log
        .iter()
        .enumerate()
        .filter(|(_, (_, event))| event["name"] == agent_tower::runs::TAKEOVER)
    {
        let opening = (0..marker)
            .rev()
            .take_while(|at| {
                matches!(
                    log[*at].1["type"].as_str(),
                    Some("RUN_STARTED" | "STATE_SNAPSHOT")
                )
            })
            .last()
            .filter(|at| log[*at].1["type"] == "RUN_STARTED");
        let before = |at: usize| if at == 0 { 0 } else { seq_of(at - 1) };
        let begin = opening
            .filter(|at| seq_of(*at) == before(*at) + agent_tower::runs::SENT_AHEAD + 1)
            .unwrap_or(marker);
        begins.insert(begin);
    }
    let mut seq = 0;
    (0..log.len())
        .map(|at| {
            if begins.contains(&at) {
                seq += agent_tower::runs::SENT_AHEAD;
            }
            seq += 1;
            format!("{run}:{seq}")
        })
        .collect()
}
