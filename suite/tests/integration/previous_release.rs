//! A run made by an earlier release (`reports/tests/data/default-run`) reads to the same
//! report and `compare` verdicts: snapshots (`insta`, in `snapshots/`) of every report
//! table as CSV and Markdown, of the HTML page's text, and of three comparisons. The
//! snapshots of the tables and comparisons were the files that release wrote
//! (`tests/data/previous-release/README.md` says which); a change to them is a change of
//! what a reader sees, reviewed as a diff of the `.snap` files.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../reports/tests/data/default-run")
}

fn copy_dir(from: &Path, to: &Path, skip: &dyn Fn(&Path) -> bool) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if skip(&entry.path()) {
            continue;
        }
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()), skip);
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// `stratlab compare` of `baseline` and `new`: exit code and standard output without the
/// two lines naming the files it wrote.
fn compare(baseline: &Path, new: &Path, out: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let output = Command::cargo_bin("stratlab")
        .unwrap()
        .arg("compare")
        .args([baseline, new])
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.len() > 3 && lines[lines.len() - 1].ends_with("comparison.json"), "{stdout}");
    (output.status.code(), lines[..lines.len() - 3].join("\n") + "\n")
}

/// The report of the fixture run, written into `out`.
fn report(out: &Path) {
    let output = Command::cargo_bin("stratlab").unwrap().arg("report").arg(fixture()).arg("--out").arg(out).output();
    let output = output.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// The text a reader of an HTML page sees, a line per block: tags, the stylesheet and the
/// embedded figures' data left out, entities decoded, and the time the page was made
/// replaced, since it changes with every report.
fn page_text(html: &str) -> String {
    let without_style = match (html.find("<style>"), html.find("</style>")) {
        (Some(start), Some(end)) => format!("{}{}", &html[..start], &html[end + "</style>".len()..]),
        _ => html.to_owned(),
    };
    let mut text = String::new();
    let mut in_tag = false;
    let mut tag = String::new();
    for c in without_style.chars() {
        match (in_tag, c) {
            (false, '<') => (in_tag, tag) = (true, String::new()),
            (true, '>') => {
                in_tag = false;
                // Block-level tags and cells end a piece of text.
                let name = tag.trim_start_matches('/').split_whitespace().next().unwrap_or("").to_lowercase();
                if [
                    "p",
                    "div",
                    "h1",
                    "h2",
                    "h3",
                    "li",
                    "tr",
                    "td",
                    "th",
                    "pre",
                    "br",
                    "caption",
                    "figcaption",
                    "dt",
                    "dd",
                ]
                .contains(&name.as_str())
                {
                    text.push('\n');
                }
            }
            (true, c) => tag.push(c),
            (false, c) => text.push(c),
        }
    }
    let decoded = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&");
    decoded
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| match line.find("· generated ") {
            Some(at) => format!("{}· generated [time]", &line[..at]),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_report_tables_are_the_ones_the_previous_release_wrote() {
    let out = tempfile::tempdir().unwrap();
    report(out.path());
    let tables = out.path().join("tables");
    let mut names: Vec<String> =
        std::fs::read_dir(&tables).unwrap().map(|entry| entry.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    insta::assert_snapshot!("table_files", names.join("\n"));
    for name in names {
        let written = std::fs::read_to_string(tables.join(&name)).unwrap();
        insta::assert_snapshot!(format!("table_{}", name.replace('.', "_")), written);
    }
}

#[test]
fn the_report_page_reads_as_the_previous_release_s() {
    let out = tempfile::tempdir().unwrap();
    report(out.path());
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    insta::assert_snapshot!("page_text", page_text(&html));
}

#[test]
fn compare_gives_the_previous_release_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture();
    // The new run is a copy of the baseline without its hybrid trial, named `new`.
    let new = dir.path().join("new");
    copy_dir(&fixture, &new, &|path| {
        path.file_name().unwrap().to_string_lossy().starts_with("small-cnn__mnist__hybrid")
    });

    let (code, text) = compare(&fixture, &fixture, &dir.path().join("self"), &[]);
    assert_eq!(code, Some(0));
    insta::assert_snapshot!("compare_self", text);
    let (code, text) = compare(&fixture, &new, &dir.path().join("missing"), &[]);
    assert_eq!(code, Some(3));
    insta::assert_snapshot!("compare_missing_hybrid", text);
    let (code, text) = compare(&fixture, &new, &dir.path().join("allowed"), &["--allow-missing"]);
    assert_eq!(code, Some(0));
    insta::assert_snapshot!("compare_missing_hybrid_allowed", text);
}
