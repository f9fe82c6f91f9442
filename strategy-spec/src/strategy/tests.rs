//! Strategy rules: which parameter applies where, ranges, defaults, feasibility.

use super::*;

fn gpipe(m: usize) -> Strategy {
    Strategy::new(StrategyKind::Gpipe, Parameters { micro_batches: Some(m), ..Parameters::default() }).unwrap()
}

#[test]
fn a_parameter_of_another_strategy_is_refused_naming_where_it_applies() {
    let error =
        Strategy::new(StrategyKind::Single, Parameters { micro_batches: Some(2), ..Default::default() }).unwrap_err();
    assert_eq!(error.field, "micro_batches");
    assert_eq!(
        error.message,
        "does not apply to strategy single; it applies to gpipe, 1f1b, pipedream, interleaved-1f1b, zero-bubble, hybrid"
    );
    let error = Strategy::new(
        StrategyKind::PipeDream,
        Parameters { checkpoint: Some(Checkpoint::Always), ..Default::default() },
    )
    .unwrap_err();
    assert!(error.message.contains("model-parallel, gpipe, 1f1b, interleaved-1f1b, hybrid"), "{error}");
    let error = Strategy::new(StrategyKind::Hybrid, Parameters::default()).unwrap_err();
    assert_eq!(error.field, "pipeline_stages");
    let error = Strategy::new(StrategyKind::Interleaved1F1B, Parameters::default()).unwrap_err();
    assert_eq!(error.field, "virtual_stages");
    let one = Parameters { virtual_stages: Some(1), ..Default::default() };
    let error = Strategy::new(StrategyKind::Interleaved1F1B, one).unwrap_err();
    assert!(error.message.contains("one stage per worker is 1f1b"), "{error}");
    // Zero-bubble's V holds exactly two stages per worker and takes no checkpoint mode.
    let three = Parameters { placement: Some(Placement::V), virtual_stages: Some(3), ..Default::default() };
    let error = Strategy::new(StrategyKind::ZeroBubble, three).unwrap_err();
    assert_eq!(
        (error.field, error.message.as_str()),
        ("virtual_stages", "the v placement holds exactly 2 stages per worker (ZB-V)")
    );
    let checkpointed = Parameters { checkpoint: Some(Checkpoint::Always), ..Default::default() };
    assert_eq!(Strategy::new(StrategyKind::ZeroBubble, checkpointed).unwrap_err().field, "checkpoint");
    let v = Strategy::new(StrategyKind::ZeroBubble, Parameters { placement: Some(Placement::V), ..Default::default() });
    assert_eq!(v.unwrap().schedule(), Some(Schedule::ZeroBubble { placement: Placement::V, virtual_stages: 2 }));
    let h1 = Strategy::new(StrategyKind::ZeroBubble, Parameters::default()).unwrap();
    assert_eq!(h1.schedule(), Some(Schedule::ZeroBubble { placement: Placement::Loop, virtual_stages: 1 }));
}

#[test]
fn each_declared_parameter_reads_the_field_it_names() {
    // Every parameter given alone: exactly the rule of its name sees it.
    let alone = |field: &str| -> Parameters {
        let mut parameters = Parameters::default();
        match field {
            "micro_batches" => parameters.micro_batches = Some(2),
            "balance" => parameters.balance = Some(Balance::Time),
            "checkpoint" => parameters.checkpoint = Some(Checkpoint::Always),
            "fusion_threshold_mib" => parameters.fusion_threshold_mib = Some(8),
            "server" => parameters.server = Some(ServerPlacement::Dedicated),
            "pipeline_stages" => parameters.pipeline_stages = Some(2),
            "stage" => parameters.stage = Some(ZeroStage::Two),
            "shard_unit" => parameters.shard_unit = Some(ShardUnit::Network),
            "mode" => parameters.mode = Some(ServerMode::Async),
            "staleness" => parameters.staleness = Some(2),
            "backup_workers" => parameters.backup_workers = Some(1),
            "lr_per_update" => parameters.lr_per_update = Some(crate::LearningRate(0.005)),
            "virtual_stages" => parameters.virtual_stages = Some(2),
            "stage_replicas" => parameters.stage_replicas = Some(StageReplicas::try_from(vec![2, 1]).unwrap()),
            "placement" => parameters.placement = Some(Placement::V),
            other => panic!("a parameter is declared as {other}, which this test does not set"),
        }
        parameters
    };
    for declared in &PARAMETERS {
        let parameters = alone(declared.key);
        let seen: Vec<&str> =
            PARAMETERS.iter().filter(|other| (other.given)(&parameters).is_some()).map(|other| other.key).collect();
        assert_eq!(seen, [declared.key]);
    }
}

#[test]
fn parameters_round_trip_and_defaults_apply_where_none_was_given() {
    let hybrid = Strategy::new(
        StrategyKind::Hybrid,
        Parameters {
            pipeline_stages: Some(2),
            micro_batches: Some(4),
            balance: Some(Balance::Time),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(Strategy::new(hybrid.kind(), hybrid.parameters()).unwrap(), hybrid);
    assert_eq!(hybrid.pipeline_shape(6).unwrap(), (2, 3));
    assert_eq!(hybrid.global_batch(32, 6), 96, "one batch per replica");
    assert_eq!(hybrid.checkpoint(), Checkpoint::Never);
    let data_parallel = Strategy::new(StrategyKind::DataParallel, Parameters::default()).unwrap();
    assert_eq!(data_parallel.fusion_threshold_bytes(), 64 << 20);
    assert_eq!(data_parallel.global_batch(32, 4), 128);
    let model_parallel = Strategy::new(StrategyKind::ModelParallel, Parameters::default()).unwrap();
    assert_eq!(model_parallel.micro_batches(), 1);
    assert_eq!(gpipe(4).micro_batches(), 4);
}

#[test]
fn infeasible_cells_say_why() {
    assert_eq!(gpipe(4).check(2, 2, "small-cnn", 5).unwrap_err().0, "4 micro-batches exceed the batch of 2 samples");
    let reason = gpipe(1).check(8, 32, "small-cnn", 5).unwrap_err().0;
    assert!(reason.starts_with("small-cnn: 8 pipeline stages requested") && reason.contains('5'), "{reason}");
    assert!(Strategy::Single.check(2, 32, "small-cnn", 5).is_err());
    assert_eq!(gpipe(4).check(2, 32, "small-cnn", 5), Ok(()));
    // Interleaved cuts v × workers stages, and runs whole rounds of micro-batches.
    let interleaved = |v: usize, m: usize| {
        let parameters = Parameters { virtual_stages: Some(v), micro_batches: Some(m), ..Parameters::default() };
        Strategy::new(StrategyKind::Interleaved1F1B, parameters).unwrap()
    };
    assert_eq!(interleaved(2, 4).pipeline_stage_count(2), Ok(4));
    assert_eq!(interleaved(2, 4).check(2, 32, "small-cnn", 5), Ok(()));
    let reason = interleaved(3, 4).check(2, 32, "small-cnn", 5).unwrap_err().0;
    assert!(reason.starts_with("small-cnn: 6 pipeline stages requested"), "{reason}");
    let reason = interleaved(2, 9).check(4, 36, "vgg-19", 24).unwrap_err().0;
    assert!(reason.contains("9 is not a multiple of 2"), "{reason}");
    // Zero-bubble's loop placement runs whole rounds too; its V cuts two stages per worker.
    let zero_bubble = |placement, m: usize| {
        let parameters = Parameters { placement: Some(placement), micro_batches: Some(m), ..Parameters::default() };
        Strategy::new(StrategyKind::ZeroBubble, parameters).unwrap()
    };
    let reason = zero_bubble(Placement::Loop, 5).check(2, 40, "vgg11", 14).unwrap_err().0;
    assert!(
        reason.starts_with("zero-bubble (loop) runs micro-batches in rounds") && reason.contains("5 is not"),
        "{reason}"
    );
    assert_eq!(zero_bubble(Placement::V, 5).check(2, 40, "vgg11", 14), Ok(()));
    assert_eq!(zero_bubble(Placement::V, 4).pipeline_stage_count(3), Ok(6));
    let reason = zero_bubble(Placement::V, 4).check(4, 32, "small-cnn", 5).unwrap_err().0;
    assert!(reason.starts_with("small-cnn: 8 pipeline stages requested"), "{reason}");
}

#[test]
fn a_trial_spec_carries_the_strategy_as_tagged_json() {
    let json = serde_json::to_string(&gpipe(4)).unwrap();
    assert_eq!(json, r#"{"name":"gpipe","micro_batches":4,"balance":null,"checkpoint":null}"#);
    assert_eq!(serde_json::from_str::<Strategy>(&json).unwrap(), gpipe(4));
}

#[test]
fn stage_replicas_apply_to_1f1b_and_pipedream_and_their_workers_and_micro_batches_must_fit() {
    let two_one = || Some(StageReplicas::try_from(vec![2, 1]).unwrap());
    let error =
        Strategy::new(StrategyKind::Gpipe, Parameters { stage_replicas: two_one(), ..Default::default() }).unwrap_err();
    assert_eq!(error.field, "stage_replicas");
    assert!(error.message.ends_with("it applies to 1f1b, pipedream"), "{error}");
    let replicated = |kind, m| {
        Strategy::new(kind, Parameters { stage_replicas: two_one(), micro_batches: Some(m), ..Default::default() })
            .unwrap()
    };
    for kind in [StrategyKind::OneFOneB, StrategyKind::PipeDream] {
        let strategy = replicated(kind, 4);
        assert_eq!(Strategy::new(kind, strategy.parameters()).unwrap(), strategy);
        assert_eq!((strategy.pipeline_shape(3), strategy.pipeline_stage_count(3)), (Ok((2, 1)), Ok(2)));
        assert_eq!(strategy.stage_shares(3), Ok(vec![2, 1]));
        assert_eq!(strategy.global_batch(32, 3), 32, "one pipeline, one batch");
        assert_eq!(strategy.check(3, 32, "vgg11", 14), Ok(()));
        let reason = strategy.check(4, 32, "vgg11", 14).unwrap_err().0;
        assert_eq!(reason, "stage_replicas 2-1 runs on 3 workers; the cell has 4");
        let reason = replicated(kind, 3).check(3, 33, "vgg11", 14).unwrap_err().0;
        assert!(
            reason.starts_with("micro_batches 3 do not go round") && reason.ends_with("a multiple of 2"),
            "{reason}"
        );
    }
}
