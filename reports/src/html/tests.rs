//! The writer's promises checked on the file it writes: escaping, embedding, errors.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use super::*;

const SVG: &str = r#"<svg xmlns="http://www.w3.org/2000/svg" width="40" height="20"><rect width="40" height="20" fill="teal"/><text x="2" y="14">2×</text></svg>"#;

fn write_svg(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, SVG).unwrap();
    path
}

fn write_png(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    image::RgbImage::from_pixel(3, 2, image::Rgb([200, 30, 30])).save(&path).unwrap();
    path
}

fn table(title: &str, rows: usize) -> HtmlTable {
    HtmlTable {
        title: title.into(),
        header: vec!["strategy".into(), "speedup".into()],
        rows: (0..rows).map(|i| vec![format!("s{i}"), format!("{}.0×", i + 1)]).collect(),
        numeric_columns: vec![false, true],
        whole: false,
    }
}

fn section(id: &str, figures: Vec<ReportFigure>) -> ReportSection {
    ReportSection {
        id: id.into(),
        title: format!("Section {id}"),
        caption: "bars: median over repeats".into(),
        figures,
        tables: vec![table("per strategy", 2)],
    }
}

fn page(sections: Vec<ReportSection>) -> ReportPage {
    ReportPage {
        title: "stratlab run r1".into(),
        run_id: "r1".into(),
        generated_at: "2025-06-01T10:00:00Z".into(),
        headline: Some(table("results", 3)),
        sections,
        failures: vec![FailedTrialRow {
            trial_id: "t7".into(),
            network: "vgg16".into(),
            dataset: "imagenet".into(),
            strategy: "data-parallel".into(),
            workers: 4,
            outcome: stratlab_results::Outcome::Oom,
            reason: "CUDA out of memory".into(),
        }],
        fingerprint: vec![("cpu".into(), "x86_64".into()), ("torch".into(), "2.13.0".into())],
        suite_yaml: "name: smoke\nstrategies: [single]\n".into(),
        notes: vec!["single repeat: spread not shown".into()],
    }
}

/// Writes the page into `dir/out` and returns the HTML.
fn write(page: &ReportPage, dir: &Path) -> String {
    let path = write_report_html(page, &dir.join("out")).unwrap();
    assert_eq!(path, dir.join("out").join("index.html"));
    std::fs::read_to_string(path).unwrap()
}

/// The `src` of every `<img>`, in page order.
fn image_sources(html: &str) -> Vec<&str> {
    html.split("<img ").skip(1).map(|tag| tag.split("src=\"").nth(1).unwrap().split('"').next().unwrap()).collect()
}

#[test]
fn user_text_cannot_open_a_tag() {
    let dir = tempfile::tempdir().unwrap();
    let evil = "<script>alert(\"x\")</script> & <img src=x onerror=alert(1)>";
    let mut p = page(vec![section("speedup", vec![ReportFigure::new(write_svg(dir.path(), "a.svg"), evil)])]);
    p.failures[0].reason = evil.into();
    p.title = evil.into();
    p.suite_yaml = evil.into();
    p.notes.push(evil.into());
    p.fingerprint.push((evil.into(), evil.into()));
    p.headline.as_mut().unwrap().rows[0][0] = evil.into();
    p.sections[0].caption = evil.into();
    let html = write(&p, dir.path());
    assert!(!html.to_ascii_lowercase().contains("<script"), "a script tag got through");
    assert!(!html.contains("<img src=x"), "a tag got through");
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp;"));
    assert_eq!(image_sources(&html).len(), 1, "only the figure is an image");
}

#[test]
fn every_figure_is_embedded_as_a_data_uri_and_nothing_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let files =
        [write_svg(dir.path(), "speedup.svg"), write_png(dir.path(), "scaling.PNG"), write_svg(dir.path(), "x.svg")];
    let p = page(vec![
        section("speedup", vec![ReportFigure::new(&files[0], "speedup bars")]),
        section("scaling", vec![ReportFigure::new(&files[1], "scaling"), ReportFigure::new(&files[2], "more")]),
    ]);
    let html = write(&p, dir.path());
    let sources = image_sources(&html);
    assert_eq!(sources.len(), files.len());
    for (src, (file, mime)) in sources.iter().zip(files.iter().zip(["image/svg+xml", "image/png", "image/svg+xml"])) {
        let encoded = src.strip_prefix(&format!("data:{mime};base64,")).unwrap_or_else(|| panic!("{src:.40}…"));
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
        assert_eq!(decoded, std::fs::read(file).unwrap(), "{} embedded byte for byte", file.display());
    }
    for needle in ["<script", "src=\"http", "href=\"http", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "the page must load nothing, found {needle:?}");
    }
    assert!(html.contains(&format!("content=\"{}\"", markup::CONTENT_SECURITY_POLICY)));
    for anchor in ["#results", "#notes", "#speedup", "#scaling", "#failures", "#environment", "#suite"] {
        assert!(html.contains(&format!("href=\"{anchor}\"")), "contents link to {anchor}");
    }
}

#[test]
fn a_missing_figure_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("never_drawn.svg");
    let p = page(vec![section("speedup", vec![ReportFigure::new(&missing, "speedup bars")])]);
    let err = write_report_html(&p, &dir.path().join("out")).unwrap_err();
    assert!(matches!(&err, ReportError::ReadFigure { path, .. } if *path == missing), "{err:?}");
    assert!(err.to_string().contains("never_drawn.svg"), "{err}");
    assert!(!dir.path().join("out").exists(), "nothing written for a broken page");
}

#[test]
fn a_figure_that_is_neither_svg_nor_png_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pdf = dir.path().join("speedup.pdf");
    std::fs::write(&pdf, b"%PDF-1.7").unwrap();
    let p = page(vec![section("speedup", vec![ReportFigure::new(&pdf, "speedup bars")])]);
    let err = write_report_html(&p, dir.path()).unwrap_err();
    assert!(matches!(&err, ReportError::FigureFormat { path } if *path == pdf), "{err:?}");
}

#[test]
fn broken_pages_are_refused_with_the_field_at_fault() {
    let dir = tempfile::tempdir().unwrap();
    let svg = write_svg(dir.path(), "a.svg");
    let cases: Vec<(ReportPage, &str)> = vec![
        (page(vec![section("a", vec![]), section("a", vec![])]), "sections[1].id"),
        (page(vec![section("has space", vec![])]), "sections[0].id"),
        (page(vec![section("failures", vec![])]), "sections[0].id"),
        (page(vec![section("a", vec![ReportFigure::new(&svg, "  ")])]), "sections[0].figures[0].alt"),
        (
            {
                let mut p = page(vec![]);
                p.headline.as_mut().unwrap().rows[1].pop();
                p
            },
            "headline.rows[1]",
        ),
    ];
    for (p, field) in cases {
        match write_report_html(&p, &dir.path().join("out")) {
            Err(ReportError::InvalidInput { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: expected InvalidInput, got {other:?}"),
        }
    }
}

#[test]
fn rewriting_replaces_the_page_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = page(vec![]);
    write(&p, dir.path());
    p.title = "second".into();
    p.failures.clear();
    p.fingerprint.clear();
    p.suite_yaml.clear();
    let html = write(&p, dir.path());
    assert!(html.contains("<title>second</title>"));
    assert!(html.contains("No trial failed.") && html.contains("No environment fingerprint"));
    let names: Vec<String> = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["index.html"]);
}

#[test]
fn columns_the_same_in_every_row_are_said_once_under_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let wide = HtmlTable {
        title: "throughput".into(),
        header: ["strategy", "W", "samples/s (median)", "samples/s (min)", "samples/s (max)", "outcome"]
            .map(String::from)
            .to_vec(),
        rows: vec![
            ["single", "1", "1410", "1410", "1410", "ok"].map(String::from).to_vec(),
            ["gpipe", "2", "744", "744", "744", "ok"].map(String::from).to_vec(),
        ],
        numeric_columns: vec![false, true, true, true, true, false],
        whole: false,
    };
    let mut page = page(vec![]);
    page.headline = Some(wide);
    let html = write(&page, dir.path());
    let headings: Vec<&str> =
        first_table(&html).match_indices("scope=\"col\">").map(|(i, m)| &first_table(&html)[i + m.len()..]).collect();
    let headings: Vec<&str> = headings.iter().map(|rest| &rest[..rest.find('<').unwrap()]).collect();
    assert_eq!(headings, ["strategy", "W", "samples/s (median)"], "constant and repeated columns are not shown");
    assert!(
        html.contains(
            "In every row: outcome: <strong>ok</strong>; samples/s (min) and samples/s (max) equal samples/s (median)."
        ),
        "{html}"
    );
    // A paper's grid keeps its columns, constant ones too.
    page.headline.as_mut().unwrap().whole = true;
    let html = write(&page, dir.path());
    assert!(first_table(&html).contains("scope=\"col\">outcome<") && !html.contains("In every row"), "{html}");
}

#[test]
fn a_one_row_table_shows_every_column() {
    let dir = tempfile::tempdir().unwrap();
    let mut page = page(vec![]);
    page.headline = Some(table("one row", 1));
    let html = write(&page, dir.path());
    assert!(!html.contains("In every row"), "one row is no evidence that a column is constant");
    assert_eq!(first_table(&html).matches("scope=\"col\"").count(), 2);
}

/// The page's first table (the headline), up to its end.
fn first_table(html: &str) -> &str {
    let start = html.find("<table").expect("a table");
    &html[start..start + html[start..].find("</table>").unwrap()]
}
