//! The HTML report opened in a real browser: headless Chromium (Debian's `chromium`, installed
//! by `just setup-chromium`) loads `index.html` and a small script reports whether every
//! embedded figure decoded and how many body rows each table has. Reading the markup alone
//! cannot show that a `data:` URI decodes or that the page's policy lets the images through.
//!
//! The production page has no script (its Content-Security-Policy forbids one), so each test
//! checks a copy with the checking script injected and the policy widened by exactly
//! `script-src 'unsafe-inline'`; images still load under the page's own `img-src data:`.
//!
//! Chromium missing is a failure, not a skip: a silently skipped browser test is a test
//! nobody runs.

use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;
use stratlab_reports::*;

/// Longest a Chromium run may take before it is killed; a run takes one to two seconds.
const CHROMIUM_LIMIT: Duration = Duration::from_secs(60);

/// Reports each image's load state and each table's body rows, then replaces the body with
/// the JSON result so the dumped DOM stays small (the page itself holds megabytes of base64).
const CHECK_SCRIPT: &str = r#"<script>
addEventListener('load', () => {
  const main = document.querySelector('main').getBoundingClientRect().width;
  const images = Array.from(document.images, img => ({
    alt: img.alt,
    loaded: img.complete && img.naturalWidth > 0,
    natural_width: img.naturalWidth,
    shown_width: img.getBoundingClientRect().width,
  }));
  const tables = Array.from(document.querySelectorAll('table'), t => ({
    caption: t.caption ? t.caption.textContent : '',
    body_rows: t.tBodies.length ? t.tBodies[0].rows.length : 0,
    height: t.getBoundingClientRect().height,
  }));
  const reasons = Array.from(document.querySelectorAll('td.reason'), td => td.textContent);
  const out = document.createElement('pre');
  out.id = 'stratlab-check';
  out.textContent = JSON.stringify({ main_width: main, images, tables, reasons });
  document.body.replaceChildren(out);
});
</script>"#;

/// Measures what a reader at a given window width sees: each table box's own width against
/// what it holds and where it sits in the window, and the bars of the bar figures (medians,
/// outlined in ink) at the size the figure is shown. Bars are read from each SVG's source:
/// a filled rectangle with an ink outline of the same geometry is a bar (or a legend
/// swatch); the figure's background and failed-trial stubs are not.
const LAYOUT_SCRIPT: &str = r#"<script>
addEventListener('load', () => {
  const viewport = document.documentElement.clientWidth;
  const tables = Array.from(document.querySelectorAll('.table-wrap'), wrap => {
    const box = wrap.getBoundingClientRect();
    const table = wrap.querySelector('table');
    return {
      caption: table && table.caption ? table.caption.textContent : '',
      scroll_width: wrap.scrollWidth,
      client_width: wrap.clientWidth,
      left: box.left,
      right: box.right,
    };
  });
  const svg = 'data:image/svg+xml;base64,';
  const figures = Array.from(document.images)
    .filter(img => img.src.startsWith(svg))
    .map(img => {
      const bytes = Uint8Array.from(atob(img.src.slice(svg.length)), c => c.charCodeAt(0));
      const doc = new DOMParser().parseFromString(new TextDecoder().decode(bytes), 'image/svg+xml');
      const scale = img.getBoundingClientRect().width / img.naturalWidth;
      const key = r => ['x', 'y', 'width', 'height'].map(a => r.getAttribute(a)).join(',');
      const outlined = new Set(Array.from(doc.querySelectorAll('rect'))
        .filter(r => r.getAttribute('fill') === 'none' && r.getAttribute('stroke') === '#282828')
        .map(key));
      const bars = Array.from(doc.querySelectorAll('rect'))
        .filter(r => r.getAttribute('fill') !== 'none' && outlined.has(key(r)))
        .map(r => Number(r.getAttribute('height')) * scale);
      return { alt: img.alt, bars: bars.length, lowest_bar_px: bars.length ? Math.min(...bars) : null };
    });
  const out = document.createElement('pre');
  out.id = 'stratlab-check';
  out.textContent = JSON.stringify({ viewport, tables, figures });
  document.body.replaceChildren(out);
});
</script>"#;

/// The window a reader of a report is assumed to have, at least.
const READER_WIDTH_PX: u32 = 1400;
/// The smallest a bar may be drawn, as shown in that window: about 2.5 mm on a laptop
/// screen, enough to see it and read it against the axis.
const READABLE_BAR_PX: f64 = 10.0;

const POLICY: &str = "default-src 'none';";
const POLICY_WITH_SCRIPT: &str = "default-src 'none'; script-src 'unsafe-inline';";

#[test]
fn every_figure_loads_and_every_table_renders_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let figures = dir.path().join("figures");
    let bars = throughput_input();
    let speedup = speedup_bars(&speedup_bars_input(), &svg_only(&figures, "speedup")).unwrap();
    let scaling = speedup_scaling(&scaling_input(), &svg_only(&figures, "scaling")).unwrap();
    let rate = throughput(&bars, &FigureTarget::new(&figures, "throughput").with_formats(&[Format::Png])).unwrap();
    let reason = "<script>alert(1)</script> CUDA out of memory";
    let page = ReportPage {
        title: "stratlab run chromium-check".into(),
        run_id: "chromium-check".into(),
        generated_at: "2025-06-01T10:00:00Z".into(),
        headline: Some(text_table("Speedup over single at W = 4", 4, 5)),
        sections: vec![
            section(
                "speedup",
                vec![ReportFigure::new(&speedup[0], "Speedup over single per network and strategy")],
                vec![],
            ),
            section("scaling", vec![ReportFigure::new(&scaling[0], "Speedup against worker count")], vec![]),
            section(
                "throughput",
                vec![ReportFigure::new(&rate[0], "Throughput and epoch time per strategy")],
                vec![text_table("Throughput per trial", bars.len(), 4)],
            ),
        ],
        failures: vec![failed("t1", "oom", reason), failed("t2", "crashed", "worker 1 exited with signal 9")],
        fingerprint: vec![
            ("host".into(), "ci".into()),
            ("torch".into(), "2.13.0".into()),
            ("cuda".into(), "none".into()),
        ],
        suite_yaml: "name: chromium-check\nstrategies: [single, data-parallel]\n".into(),
        notes: vec!["single repeat: spread not shown".into()],
    };
    let result = check_in_chromium(&page, dir.path());

    let images = result["images"].as_array().unwrap();
    assert_eq!(images.len(), 3, "{result}");
    let main_width = result["main_width"].as_f64().unwrap();
    for image in images {
        assert_eq!(image["loaded"], true, "image did not load: {image}");
        assert!(image["natural_width"].as_f64().unwrap() >= 1000.0, "figures are drawn 1200 px wide: {image}");
        let shown = image["shown_width"].as_f64().unwrap();
        assert!(shown > 0.5 * main_width && shown <= main_width + 0.5, "scaled to the column ({main_width}): {image}");
    }
    // Page order: headline, the throughput section's table, failures, fingerprint.
    let rows: Vec<u64> =
        result["tables"].as_array().unwrap().iter().map(|t| t["body_rows"].as_u64().unwrap()).collect();
    assert_eq!(rows, [4, bars.len() as u64, 2, 3], "{result}");
    for table in result["tables"].as_array().unwrap() {
        assert!(table["height"].as_f64().unwrap() > 20.0, "table not laid out: {table}");
    }
    assert_eq!(result["reasons"][0], reason, "the reason is shown as text, not run");
}

/// The report of a real default run (`suite/default.yaml`, the fixture in
/// `tests/data/default-run`, made by `stratlab run` without its traces): the small CNN's
/// 1200 samples/s beside ResNet-18's 50, tables of up to 22 columns.
#[test]
fn the_default_runs_report_fits_a_1400_px_window_and_every_bar_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/default-run");
    let report = write_run_report(&run, &dir.path().join("report"), Format::Svg, None).unwrap();
    let html = std::fs::read_to_string(&report.index_html).unwrap();
    let result = run_script_in_chromium(&html, LAYOUT_SCRIPT, READER_WIDTH_PX, dir.path());

    let viewport = result["viewport"].as_f64().unwrap();
    let tables = result["tables"].as_array().unwrap();
    assert!(tables.len() >= 8, "the default run's report has its tables: {result}");
    for table in tables {
        let (scroll, client) = (table["scroll_width"].as_f64().unwrap(), table["client_width"].as_f64().unwrap());
        assert!(scroll <= client + 1.0, "a table holds more than its box shows (cut or scrolled): {table}");
        let (left, right) = (table["left"].as_f64().unwrap(), table["right"].as_f64().unwrap());
        assert!(left >= 0.0 && right <= viewport, "a table box runs past the {viewport} px window: {table}");
    }
    let bar_figures: Vec<&Value> = result["figures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| {
            let alt = f["alt"].as_str().unwrap();
            ["Speedup over single at", "Training throughput", "Mean and peak device"].iter().any(|p| alt.starts_with(p))
        })
        .collect();
    assert_eq!(bar_figures.len(), 4, "speedup at W = 2 and 4, throughput, device usage: {result}");
    for figure in bar_figures {
        assert!(figure["bars"].as_u64().unwrap() >= 2, "at least a bar and its legend swatch: {figure}");
        let lowest = figure["lowest_bar_px"].as_f64().unwrap();
        assert!(lowest >= READABLE_BAR_PX, "a bar is {lowest:.1} px tall, under {READABLE_BAR_PX} px: {figure}");
    }
}

#[test]
fn a_figure_that_does_not_decode_is_reported_as_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.svg");
    std::fs::write(&good, r#"<svg xmlns="http://www.w3.org/2000/svg" width="300" height="100"><rect width="300" height="100" fill="teal"/></svg>"#).unwrap();
    let garbage = dir.path().join("garbage.png");
    std::fs::write(&garbage, b"this is not a PNG").unwrap();
    // The easy mistake in hand-made SVG: without the namespace a browser will not draw it.
    let no_namespace = dir.path().join("no_namespace.svg");
    std::fs::write(&no_namespace, r#"<svg width="300" height="100"><rect width="300" height="100"/></svg>"#).unwrap();
    let page = ReportPage {
        title: "broken".into(),
        sections: vec![section(
            "figures",
            vec![
                ReportFigure::new(&good, "good"),
                ReportFigure::new(&garbage, "garbage"),
                ReportFigure::new(&no_namespace, "no namespace"),
            ],
            vec![],
        )],
        ..ReportPage::default()
    };
    let result = check_in_chromium(&page, dir.path());
    let loaded: Vec<(&str, bool)> = result["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["alt"].as_str().unwrap(), i["loaded"].as_bool().unwrap()))
        .collect();
    assert_eq!(loaded, [("good", true), ("garbage", false), ("no namespace", false)], "{result}");
}

#[test]
fn the_page_policy_keeps_scripts_from_running() {
    let dir = tempfile::tempdir().unwrap();
    let page = ReportPage { title: "policy".into(), ..ReportPage::default() };
    let index = write_report_html(&page, &dir.path().join("report")).unwrap();
    let html = std::fs::read_to_string(index).unwrap();
    // The script injected without widening the policy: it must not run.
    let copy = dir.path().join("unpatched.html");
    std::fs::write(&copy, html.replacen("</body>", &format!("{CHECK_SCRIPT}</body>"), 1)).unwrap();
    let dom = dump_dom(&copy, dir.path(), 1280);
    assert!(dom.contains("<title>policy</title>"), "Chromium dumped no page: {dom:.300}");
    assert!(!dom.contains("id=\"stratlab-check\""), "a script ran despite the page's policy");
}

/// Writes `page`, checks a copy in Chromium, and returns the script's JSON result.
fn check_in_chromium(page: &ReportPage, dir: &Path) -> Value {
    let index = write_report_html(page, &dir.join("report")).unwrap();
    let html = std::fs::read_to_string(&index).unwrap();
    run_script_in_chromium(&html, CHECK_SCRIPT, 1280, dir)
}

/// Opens a copy of the page `html` with `script` injected (and the policy widened to let
/// it run) in a `width` px wide window, and returns the JSON the script left.
fn run_script_in_chromium(html: &str, script: &str, width: u32, dir: &Path) -> Value {
    assert!(!html.contains("<script"), "the production page must hold no script");
    assert_eq!(html.matches(POLICY).count(), 1, "the page's policy changed; update this test");
    let checked = html.replacen(POLICY, POLICY_WITH_SCRIPT, 1).replacen("</body>", &format!("{script}</body>"), 1);
    let copy = dir.join("index.checked.html");
    std::fs::write(&copy, checked).unwrap();
    let dom = dump_dom(&copy, dir, width);
    let start = r#"<pre id="stratlab-check">"#;
    let json = dom
        .split_once(start)
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .unwrap_or_else(|| panic!("the check script left no result; dumped DOM: {dom:.2000}"))
        .0;
    // Text nodes are serialised with &, <, > and no-break space escaped; nothing else.
    let json = json.replace("&lt;", "<").replace("&gt;", ">").replace("&nbsp;", "\u{a0}").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// Loads `file` in headless Chromium, in a window `width` px wide, and returns the DOM after
/// the load handlers ran. Killed (with its helper processes) after [`CHROMIUM_LIMIT`] so a
/// hung browser fails the test instead of hanging it.
fn dump_dom(file: &Path, work: &Path, width: u32) -> String {
    let binary = std::env::var("STRATLAB_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let (out, log) = (work.join("dom.html"), work.join("chromium.log"));
    let mut command = Command::new(&binary);
    command
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .args(["--no-default-browser-check", "--disable-extensions", "--hide-scrollbars"])
        .arg(format!("--window-size={width},1024"))
        .arg("--virtual-time-budget=10000")
        // A profile per run: parallel tests sharing the default profile would hand their
        // page to the first browser and exit.
        .arg(format!("--user-data-dir={}", work.join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", file.display()))
        .stdin(Stdio::null())
        .stdout(File::create(&out).unwrap())
        .stderr(File::create(&log).unwrap())
        // Its own process group, so a kill reaches the renderer and GPU helpers too.
        .process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "`{binary}` not found: the HTML report test needs headless Chromium. \
             Run `just setup-chromium` (installs Debian's chromium), or set STRATLAB_CHROMIUM to a Chromium binary."
        ),
        Err(e) => panic!("starting `{binary}`: {e}"),
    };
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CHROMIUM_LIMIT {
            let _ = Command::new("kill").args(["-KILL", "--", &format!("-{}", child.id())]).status();
            let _ = child.kill();
            let _ = child.wait();
            panic!("Chromium ran past {CHROMIUM_LIMIT:?} and was killed; its log:\n{}", read(&log));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "Chromium failed ({status}); its log:\n{}", read(&log));
    read(&out)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| format!("({}: {e})", path.display()))
}

fn svg_only(dir: &Path, stem: &str) -> FigureTarget {
    FigureTarget::new(dir, stem).with_formats(&[Format::Svg])
}

fn section(id: &str, figures: Vec<ReportFigure>, tables: Vec<HtmlTable>) -> ReportSection {
    ReportSection {
        id: id.into(),
        title: format!("{id} figures"),
        caption: format!("How to read {id}."),
        figures,
        tables,
    }
}

/// A `rows` × `columns` table, the first column text and the rest numbers.
fn text_table(title: &str, rows: usize, columns: usize) -> HtmlTable {
    HtmlTable {
        title: title.into(),
        header: (0..columns).map(|c| format!("column {c}")).collect(),
        rows: (0..rows).map(|r| (0..columns).map(|c| format!("{}", r * 10 + c)).collect()).collect(),
        numeric_columns: (0..columns).map(|c| c > 0).collect(),
        whole: false,
    }
}

fn failed(trial_id: &str, outcome: &str, reason: &str) -> FailedTrialRow {
    FailedTrialRow {
        trial_id: trial_id.into(),
        network: "vgg16".into(),
        dataset: "imagenet".into(),
        strategy: "data-parallel".into(),
        workers: 4,
        outcome: outcome.parse().unwrap(),
        reason: reason.into(),
    }
}
