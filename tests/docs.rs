//! The README and the guides in `docs/` (an mdBook): every relative link leads to a file that
//! exists and, when it names a heading, to that heading; every guide is in `docs/SUMMARY.md`,
//! which is a summary mdBook reads; the README stays a front door (at most 150 lines). Their
//! Rust code is compiled as doctests (`src/lib.rs`).

use std::{collections::BTreeSet, path::Path};

/// The links of a Markdown text, outside code: the targets of `[text](target)`.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        // Inline code may hold `](`: leave it out.
        let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
        let mut rest = prose.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                found.push(rest[..end].to_owned());
                rest = &rest[end..];
            }
        }
    }
    found
}

/// The anchors of a Markdown text's headings, as mdBook and GitHub make them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let heading = line.trim_start_matches('#').trim().to_lowercase();
        let anchor: String = heading
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        found.insert(anchor);
    }
    found
}

fn pages(root: &Path) -> Vec<std::path::PathBuf> {
    let mut pages: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.push(root.join("README.md"));
    pages.sort();
    pages
}

#[test]
fn every_relative_link_leads_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut broken = Vec::new();
    for page in pages(root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", page.display()));
                continue;
            }
            if !anchor.is_empty() {
                let target_text = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&target_text).contains(anchor) {
                    broken.push(format!("{}: {link} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every guide is in `docs/SUMMARY.md`, and the summary is one mdBook reads: a title, then
/// prefix chapters, part titles and chapters (one link to a page each), nothing else; and
/// `docs/book.toml` creates no page the summary names and the repository lacks.
#[test]
fn every_guide_is_in_the_book() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let summary = std::fs::read_to_string(root.join("docs/SUMMARY.md")).unwrap();
    // `[Title](page.md)`, and nothing around it.
    let chapter = |item: &str| match &links(item)[..] {
        [page] => {
            page.ends_with(".md") && item.starts_with('[') && item.ends_with(&format!("]({page})"))
        }
        _ => false,
    };
    let mut lines = summary.lines().filter(|line| !line.trim().is_empty());
    assert!(
        lines.next().is_some_and(|title| title.starts_with("# ")),
        "docs/SUMMARY.md opens with its title"
    );
    for line in lines {
        let item = line.trim_start().strip_prefix("- ").unwrap_or(line);
        assert!(
            line.starts_with("# ") || line == "---" || chapter(item),
            "docs/SUMMARY.md: mdBook reads no such line: {line:?}"
        );
    }
    let book = std::fs::read_to_string(root.join("docs/book.toml")).unwrap();
    assert!(
        book.lines()
            .any(|line| line.trim() == "create-missing = false"),
        "docs/book.toml: a page the summary names must exist, not be made"
    );
    let listed: BTreeSet<String> = links(&summary).into_iter().collect();
    for page in pages(root) {
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        if page.parent() == Some(&root.join("docs")) && name != "SUMMARY.md" {
            assert!(
                listed.contains(&name),
                "docs/{name} is not in docs/SUMMARY.md"
            );
        }
    }
}

#[test]
fn the_readme_is_a_front_door() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines: move the detail into docs/"
    );
}
