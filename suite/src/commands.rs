//! One function per subcommand; `main` only dispatches here and maps errors to exit codes.

use std::process::ExitCode;

use anyhow::{bail, Context};
use stratlab_datasets::{DataCache, DatasetSelector};
use stratlab_strategies::{Budget, DeviceChoice, LrSchedule, TrainConfig, TrainError};
use stratlab_strategy_spec::StrategyKind;

use crate::auto_compute::ChoiceStore;
use crate::cli::{Command, DataCommand, ExportFormatArg, FigureFormatArg, ScheduleArg, TrainArgs};
use crate::exit::InputError;
use crate::plan::plan;
use crate::profiles::ProfileCache;
use crate::progress::TrainProgress;
use crate::runner::{run_suite, RunOptions};
use crate::shapes::input_shape;
use crate::suite_file::SuiteFile;
use stratlab_results::{ExportFormat, RunStore};

/// Runs one subcommand.
pub fn execute(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Networks => networks(),
        Command::Inspect { network, dataset, batch } => inspect(&network, &dataset, batch),
        Command::Data { command: DataCommand::Fetch { names } } => fetch(&names),
        Command::Train(args) => train(&args),
        Command::Plan { suite } => show_plan(&suite),
        Command::Run { suite, resume, only, store, allow_mixed, no_report, no_predict, reuse } => {
            let options = RunOptions {
                suite_path: suite,
                store_dir: store,
                resume,
                only,
                allow_mixed,
                predict: !no_predict,
                profiles: reuse.policy(),
            };
            let summary = run_suite(&options)?;
            let counts: Vec<String> = summary.outcomes.iter().map(|(outcome, n)| format!("{n} {outcome}")).collect();
            println!(
                "{} trials planned, {} already finished, ran {}: {}",
                summary.planned,
                summary.already_done,
                summary.outcomes.values().sum::<usize>(),
                if counts.is_empty() { "nothing left to run".to_string() } else { counts.join(", ") }
            );
            println!("tables: {}", summary.run_dir.display());
            if !no_report {
                let report = report(&summary.run_dir, None, FigureFormatArg::Svg, None)?;
                println!("\n{}", report.terminal_matrix);
                println!("report: {}", report.index_html.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { run, out, format, history } => {
            let report = report(&run, out, format, history.as_deref())?;
            println!("{}", report.terminal_matrix);
            for path in report.figures.iter().chain(&report.tables) {
                println!("{}", path.display());
            }
            println!("report: {}", report.index_html.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare(args) => crate::regression_commands::compare_runs(&args),
        Command::History(args) => crate::regression_commands::history(&args),
        Command::Export { run, format, out } => export(&run, format, out),
        Command::Probe(args) => crate::probe::probe(&args),
        Command::Validate(args) => crate::validate::validate(&args),
        Command::Recommend {
            network,
            dataset,
            workers,
            batch,
            cluster,
            probe,
            optimizer,
            memory_limit_mib,
            precision,
            memory_format,
            steps_from,
            profiles,
        } => {
            let mut cache = ProfileCache::open(Some(&profiles.store), profiles.reuse.policy())?;
            let mut choices = ChoiceStore::open(Some(&profiles.store), profiles.reuse.policy().fresh)?;
            crate::recommend::recommend(
                &mut cache,
                &mut choices,
                &crate::recommend::Question {
                    network: &network,
                    dataset: &dataset,
                    workers,
                    batch,
                    cluster: cluster.as_deref(),
                    probe: probe.as_deref(),
                    optimizer,
                    memory_limit_bytes: memory_limit_mib.map(|mib| mib as f64 * 1024.0 * 1024.0),
                    precision,
                    memory_format,
                    steps_from: steps_from.as_deref(),
                },
            )
        }
        Command::Predict { suite, probe, cluster, against, figure, profiles } => {
            let mut cache = ProfileCache::open(Some(&profiles.store), profiles.reuse.policy())?;
            let mut choices = ChoiceStore::open(Some(&profiles.store), profiles.reuse.policy().fresh)?;
            let sources = crate::predict::Sources {
                probe: probe.as_deref(),
                cluster: cluster.as_deref(),
                against: against.as_deref(),
                figure: figure.as_deref(),
            };
            crate::predict::predict(&suite, &sources, &mut cache, &mut choices)
        }
        Command::Profile { suite, profiles } => {
            let mut cache = ProfileCache::open(Some(&profiles.store), profiles.reuse.policy())?;
            crate::predict::profile(&suite, &mut cache)
        }
        Command::Env { check_cuda } => env(check_cuda),
        Command::Worker => Ok(ExitCode::from(crate::worker::run_worker() as u8)),
        Command::ProfileWorker => Ok(ExitCode::from(crate::profile_worker::run_profile_worker() as u8)),
        Command::ContentionCopy => Ok(ExitCode::from(crate::contention_copies::run_contention_copy() as u8)),
    }
}

fn networks() -> anyhow::Result<ExitCode> {
    println!("networks:");
    for name in stratlab_networks::network_names() {
        let variants: Vec<&str> = stratlab_datasets::dataset_names()
            .iter()
            .copied()
            .filter(|dataset| {
                let info = stratlab_datasets::info(dataset).expect("registered");
                stratlab_networks::spec(name, &input_shape(info)).is_ok()
            })
            .collect();
        println!("  {name:<14} variants for: {}", variants.join(", "));
    }
    println!("data sets:");
    for name in stratlab_datasets::dataset_names() {
        let info = stratlab_datasets::info(name)?;
        println!(
            "  {name:<14} {}×{}×{}, {} classes, {} train / {} test{}",
            info.channels,
            info.height,
            info.width,
            info.classes,
            info.train_len,
            info.test_len,
            if info.synthetic_only { " (synthetic only)" } else { "" }
        );
    }
    println!("strategies: {}", StrategyKind::valid_names().join(", "));
    Ok(ExitCode::SUCCESS)
}

fn inspect(network: &str, dataset: &str, batch: i64) -> anyhow::Result<ExitCode> {
    if batch < 1 {
        return Err(InputError(format!("--batch must be at least 1, got {batch}")).into());
    }
    let info = stratlab_datasets::info(dataset)?;
    let spec = stratlab_networks::spec(network, &input_shape(info))?;
    print!("{}", spec.analyze(batch)?);
    Ok(ExitCode::SUCCESS)
}

fn fetch(names: &[String]) -> anyhow::Result<ExitCode> {
    let cache = DataCache::from_env();
    for name in names {
        let path = stratlab_datasets::fetch(name, &cache)?;
        println!("{name}: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn train(args: &TrainArgs) -> anyhow::Result<ExitCode> {
    let dataset: DatasetSelector = args.dataset.parse()?;
    let info = dataset.info()?;
    let device: DeviceChoice =
        args.device.parse().map_err(|error: stratlab_strategies::DeviceError| InputError(error.0))?;
    let budget = match (args.epochs, args.steps, args.seconds) {
        (None, None, None) => Budget { epochs: Some(1), ..Budget::default() },
        (epochs, steps, seconds) => Budget { epochs, steps, seconds, ..Budget::default() },
    };
    let cores = crate::fingerprint::cores_here();
    let config = TrainConfig {
        batch_size: args.batch_size.unwrap_or(info.batch_size),
        budget,
        optimizer: args.optimizer,
        lr: args.lr,
        momentum: args.momentum,
        weight_decay: args.weight_decay,
        schedule: match args.schedule {
            ScheduleArg::Constant => LrSchedule::Constant,
            ScheduleArg::Step => LrSchedule::Step { every_epochs: 30, gamma: 0.1 },
            ScheduleArg::Cosine => LrSchedule::Cosine,
        },
        eval_every_steps: args.eval_every,
        target_accuracy: args.target.unwrap_or(info.target_accuracy),
        seed: args.seed,
        device,
        threads: args.threads.unwrap_or(cores),
        ..TrainConfig::default()
    };
    config.validate()?;
    let data = crate::training::open_data(&dataset, args.seed, true)?;
    let mut progress = TrainProgress::new(None);
    let report = train_catching_panics(|| {
        crate::training::train(
            &stratlab_strategy_spec::Strategy::Single,
            &args.network,
            &dataset,
            &data,
            &config,
            &mut progress,
        )
    })?;
    progress.finish();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let fmt = |value: Option<f64>, unit: &str| value.map_or("—".to_string(), |v| format!("{v:.4}{unit}"));
        let step_times = report.timed_step_times();
        println!(
            "{} on {} ({}, {} threads): {:?}",
            args.network, dataset, report.device, report.threads, report.outcome
        );
        if let Some(reason) = &report.reason {
            println!("  reason:             {reason}");
        }
        println!(
            "  steps:              {} ({} warm-up, excluded from timing)",
            report.steps.len(),
            config.warmup_steps.min(report.steps.len())
        );
        println!(
            "  step time:          median {} (p10 {}, p90 {})",
            fmt(stratlab_strategies::stats::median(&step_times).map(|s| s * 1e3), " ms"),
            fmt(stratlab_strategies::stats::quantile(&step_times, 0.1).map(|s| s * 1e3), " ms"),
            fmt(stratlab_strategies::stats::quantile(&step_times, 0.9).map(|s| s * 1e3), " ms")
        );
        println!("  train throughput:   {} (÷ step time)", fmt(report.step_samples_per_s(), " samples/s"));
        println!(
            "                      {} (÷ wall time with loader waits and copies)",
            fmt(report.wall_samples_per_s(), " samples/s")
        );
        println!("  eval throughput:    {}", fmt(report.val_samples_per_s(), " samples/s"));
        println!(
            "  seconds per epoch:  {} measured, {} extrapolated from step times",
            fmt(report.seconds_per_epoch_mean(), " s"),
            fmt(report.seconds_per_epoch_estimate(), " s")
        );
        println!("  final accuracy:     {}", fmt(report.final_accuracy(), ""));
        println!("  final test loss:    {}", fmt(report.final_loss(), ""));
        println!("  time to {:.2}:      {}", report.target_accuracy, fmt(report.time_to_accuracy_s, " s"));
        println!("  wall time:          {:.2} s", report.wall_time_s);
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs in-process training and turns a panic out of libtorch (tch's non-`f_` calls panic on
/// C++ exceptions; an allocation failure is one) into an error, so `stratlab train` reports
/// an out-of-memory as an error with exit code 1, not as a crash with a backtrace.
fn train_catching_panics(
    train: impl FnOnce() -> Result<stratlab_strategies::TrainReport, TrainError>,
) -> anyhow::Result<stratlab_strategies::TrainReport> {
    let previous_hook = std::panic::take_hook();
    // The message is reported once, as the error below; the default hook would print it
    // (and a backtrace hint) first.
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(train));
    std::panic::set_hook(previous_hook);
    match result {
        Ok(Ok(report)) => Ok(report),
        Ok(Err(error)) if error.is_out_of_memory() => Err(anyhow::anyhow!("out of memory: {error}")),
        Ok(Err(error)) => Err(error.into()),
        Err(panic) => {
            let message = crate::protocol::panic_message(&*panic);
            if crate::protocol::is_out_of_memory_message(&message) {
                bail!("out of memory while training: {message}")
            }
            bail!("training failed: {message}")
        }
    }
}

fn show_plan(path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let (suite, _) = SuiteFile::load(path)?;
    let trials = plan(&suite, path)?;
    println!("{}: {} trials", path.display(), trials.len());
    for trial in &trials {
        let status = match trial.infeasibility() {
            Some(reason) => format!("  (infeasible: {reason})"),
            None => String::new(),
        };
        println!("  {:>3}  {}{status}", trial.index, trial.trial_id);
    }
    Ok(ExitCode::SUCCESS)
}

fn export(run: &std::path::Path, format: ExportFormatArg, out: Option<std::path::PathBuf>) -> anyhow::Result<ExitCode> {
    let store = RunStore::open(run)?;
    let (format, name) = match format {
        ExportFormatArg::Csv => (ExportFormat::Csv, "csv"),
        ExportFormatArg::Json => (ExportFormat::Json, "json"),
    };
    let out = out.unwrap_or_else(|| run.join(format!("export-{name}")));
    for path in store.export(format, &out)? {
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `<run>/report` (or `out`) from the run's tables; warnings go to stderr.
fn report(
    run: &std::path::Path,
    out: Option<std::path::PathBuf>,
    format: FigureFormatArg,
    history: Option<&std::path::Path>,
) -> anyhow::Result<stratlab_reports::RunReport> {
    let format = crate::regression_commands::figure_format(format);
    let history = history.map(|runs| crate::regression_commands::history_of_run(run, runs)).transpose()?;
    let out = out.unwrap_or_else(|| run.join("report"));
    let report = stratlab_reports::write_run_report(run, &out, format, history.as_ref())
        .with_context(|| format!("writing the report of {} into {}", run.display(), out.display()))?;
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    Ok(report)
}

fn env(check_cuda: bool) -> anyhow::Result<ExitCode> {
    let fingerprint = crate::fingerprint::collect(None);
    println!("{}", serde_json::to_string_pretty(&fingerprint).context("serialising the fingerprint")?);
    if check_cuda {
        let gpu_listed = std::process::Command::new("nvidia-smi")
            .arg("-L")
            .output()
            .map(|out| out.status.success() && String::from_utf8_lossy(&out.stdout).contains("GPU"))
            .unwrap_or(false);
        let cuda = tch::Cuda::is_available();
        let nccl = stratlab_comm::Backend::Nccl.is_available();
        match (gpu_listed, cuda) {
            (true, false) => bail!(
                "nvidia-smi lists a GPU but libtorch sees no CUDA: is the CUDA libtorch installed \
                 (STRATLAB_LIBTORCH_VARIANT=cuda just setup) and libtorch_cuda linked?"
            ),
            (true, true) if !nccl => bail!(
                "libtorch sees CUDA but the c10d shim was built without NCCL: rebuild after \
                 `STRATLAB_LIBTORCH_VARIANT=cuda just setup` so comm/build.rs finds libtorch_cuda"
            ),
            (true, true) if !stratlab_strategies::device_memory::cuda_cap_built() => bail!(
                "libtorch sees CUDA but the strategies shim was built without the CUDA allocator's cap: rebuild \
                 after `STRATLAB_LIBTORCH_VARIANT=cuda just setup` so strategies/build.rs finds libtorch_cuda"
            ),
            (true, true) => eprintln!(
                "check-cuda: libtorch sees {} CUDA device(s); c10d NCCL and the caching allocator's cap compiled in",
                tch::Cuda::device_count()
            ),
            (false, _) => {
                eprintln!(
                    "check-cuda: no GPU listed by nvidia-smi; CUDA paths compiled, CPU fall-back in use; \
                     c10d NCCL {}; the caching allocator's cap (device_memory_limit_mib) {}",
                    if nccl { "compiled in" } else { "not built (CPU-only libtorch): Gloo only" },
                    if stratlab_strategies::device_memory::cuda_cap_built() {
                        "compiled in"
                    } else {
                        "not built (CPU-only libtorch)"
                    }
                )
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
