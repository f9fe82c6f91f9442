//! The source papers' figures and tables in their own shapes, one section each, for the
//! figures a run's suite names in `regenerates:` (`stratlab_results::PaperFigure`). A
//! figure the run holds no cells for still gets its section, saying what it needed, so a
//! reader never wonders where it went.

mod drawn;
mod seed000;
mod seed002;
mod seed004;
mod thesis;

use stratlab_results::{PaperFigure, Regenerates};

use drawn::Drawn;
pub(crate) use drawn::PaperRun;

use crate::run_report::html_table;
use crate::tables::SummaryTable;
use crate::{HtmlTable, ReportError, ReportSection};

/// Where a section starts when its figure could not be drawn; tests look for it.
pub const NOT_DRAWN: &str = "Not drawn:";

/// A section per figure `regenerates` names, in its order; the first section also says
/// which paper the suite follows, what it keeps and changes, and how long it should take.
pub(crate) fn paper_sections(
    regenerates: &Regenerates,
    paper_run: &PaperRun<'_>,
    tables: &mut Vec<SummaryTable>,
) -> Result<Vec<ReportSection>, ReportError> {
    let mut sections = vec![overview(regenerates)];
    for &figure in &regenerates.figures {
        let (caption, figures, section_tables) = match draw(figure, paper_run)? {
            Drawn::Shown { figures, tables, caption } => (caption, figures, tables),
            Drawn::Missing(why) => (format!("{NOT_DRAWN} {why}"), Vec::new(), Vec::new()),
        };
        sections.push(ReportSection {
            id: figure.anchor(),
            title: figure.title().to_owned(),
            caption,
            figures,
            // The paper's grids keep every column, constant or not: they are its shape.
            tables: section_tables.iter().map(|table| HtmlTable { whole: true, ..html_table(table) }).collect(),
        });
        tables.extend(section_tables);
    }
    Ok(sections)
}

fn draw(figure: PaperFigure, paper_run: &PaperRun<'_>) -> Result<Drawn, ReportError> {
    match figure {
        PaperFigure::ThesisSpeedupPanels => thesis::speedup_panels(paper_run),
        PaperFigure::ThesisScaling => thesis::scaling(paper_run),
        PaperFigure::ThesisSequentialError | PaperFigure::ThesisDataParallelError | PaperFigure::ThesisGpipeError => {
            thesis::signed_error(figure, paper_run)
        }
        PaperFigure::ThesisGpipeConfigurations => thesis::gpipe_configurations(paper_run),
        PaperFigure::ThesisRecommendations | PaperFigure::ThesisRecommendationScores => {
            thesis::recommendations(figure, paper_run)
        }
        PaperFigure::Seed000AccuracyAgainstBatch | PaperFigure::Seed000TimeAgainstBatch => {
            seed000::against_batch(figure, paper_run)
        }
        PaperFigure::Seed000PerStrategy => seed000::per_strategy(paper_run),
        PaperFigure::Seed000EvaluationThroughput => seed000::evaluation_throughput(paper_run),
        PaperFigure::Seed000ValidationLoss => seed000::validation_loss(paper_run),
        PaperFigure::Seed002Scaling => seed002::scaling(paper_run),
        PaperFigure::Seed002Energy => seed002::energy(paper_run),
        PaperFigure::Seed004Table2 | PaperFigure::Seed004Table3 => seed004::table(figure, paper_run),
    }
}

/// The suite's account of itself against its paper.
fn overview(regenerates: &Regenerates) -> ReportSection {
    let list = |items: &[String]| match items.is_empty() {
        true => "nothing listed".to_owned(),
        false => items.join("; "),
    };
    let figures: Vec<&str> = regenerates.figures.iter().map(|figure| figure.name()).collect();
    ReportSection {
        id: "paper".to_owned(),
        title: format!("Regenerated from {}", regenerates.source),
        caption: format!(
            "This suite regenerates {}. It keeps: {}. It changes: {}. Expected time: about {} min on a GPU node \
             of the paper's kind, {} min on a 2-core CPU machine.",
            figures.join(", "),
            list(&regenerates.keeps),
            list(&regenerates.changes),
            regenerates.expected_minutes.gpu_node,
            regenerates.expected_minutes.here
        ),
        figures: Vec::new(),
        tables: Vec::new(),
    }
}
