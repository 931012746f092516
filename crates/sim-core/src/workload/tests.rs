//! Tests of the workload generators.
use super::sample::Zipf;
use super::*;
use crate::rng::SimRng;

const MML: u32 = 1_000_000;

fn generated(
    arrival: ArrivalSpec,
    n: u64,
    prompt: LengthSpec,
    output: LengthSpec,
) -> WorkloadSpec {
    WorkloadSpec {
        arrival: Some(arrival),
        num_requests: Some(n),
        duration_s: None,
        prompt: Some(prompt),
        output: Some(output),
        ..WorkloadSpec::empty()
    }
}

fn err_path(spec: &WorkloadSpec) -> String {
    let err = spec.validate(MML).expect_err("expected a config error");
    assert_eq!(err.kind_name(), "ConfigError", "{err}");
    err.path().expect("config error has a path").to_string()
}

fn mean_cv(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt() / mean)
}

fn gaps_s(reqs: &[RequestSpec]) -> Vec<f64> {
    reqs.windows(2)
        .map(|w| (w[1].arrival_ns - w[0].arrival_ns) as f64 * 1e-9)
        .collect()
}

#[test]
fn default_is_valid() {
    let w = WorkloadSpec::default();
    w.validate(MML).unwrap();
    let reqs = w.generate(1, MML).unwrap();
    assert_eq!(reqs.len(), 100);
    assert_eq!(w.num_requests_hint(), Some(100));
    assert_eq!(reqs[0].arrival_ns, 0);
    assert!(reqs
        .iter()
        .all(|r| r.prompt_tokens == 512 && r.output_tokens == 128 && r.priority == 0));
}

#[test]
fn determinism() {
    let w = generated(
        ArrivalSpec::gamma(5.0, 2.0),
        1000,
        LengthSpec::lognormal(300.0, 0.8),
        LengthSpec::zipf(1, 2000, 1.1),
    );
    let a = w.generate(11, MML).unwrap();
    let b = w.generate(11, MML).unwrap();
    assert_eq!(a, b);
    let c = w.generate(12, MML).unwrap();
    assert_ne!(a, c);
}

#[test]
fn streams_are_separate() {
    let a = generated(
        ArrivalSpec::poisson(3.0),
        500,
        LengthSpec::fixed(10),
        LengthSpec::fixed(5),
    );
    let mut b = a.clone();
    b.output = Some(LengthSpec::normal(100.0, 30.0));
    b.prompt = Some(LengthSpec::uniform(1, 100));
    let ra = a.generate(3, MML).unwrap();
    let rb = b.generate(3, MML).unwrap();
    let ta: Vec<u64> = ra.iter().map(|r| r.arrival_ns).collect();
    let tb: Vec<u64> = rb.iter().map(|r| r.arrival_ns).collect();
    assert_eq!(ta, tb);
    // Changing the output distribution does not change prompts.
    let mut c = b.clone();
    c.output = Some(LengthSpec::fixed(7));
    let rc = c.generate(3, MML).unwrap();
    assert!(rb
        .iter()
        .zip(&rc)
        .all(|(x, y)| x.prompt_tokens == y.prompt_tokens));
}

#[test]
fn poisson_mean_gap() {
    let w = generated(
        ArrivalSpec::poisson(4.0),
        200_001,
        LengthSpec::fixed(1),
        LengthSpec::fixed(1),
    );
    let reqs = w.generate(5, MML).unwrap();
    let (mean, cv) = mean_cv(&gaps_s(&reqs));
    assert!((mean - 0.25).abs() / 0.25 < 0.03, "mean gap {mean}");
    assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
    assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
}

#[test]
fn gamma_cv() {
    for &cv_target in &[0.5, 2.0] {
        let w = generated(
            ArrivalSpec::gamma(10.0, cv_target),
            200_001,
            LengthSpec::fixed(1),
            LengthSpec::fixed(1),
        );
        let reqs = w.generate(6, MML).unwrap();
        let (mean, cv) = mean_cv(&gaps_s(&reqs));
        assert!((mean - 0.1).abs() / 0.1 < 0.03, "mean gap {mean}");
        assert!(
            (cv - cv_target).abs() / cv_target < 0.05,
            "cv {cv} vs {cv_target}"
        );
    }
}

#[test]
fn constant_and_max_gap() {
    let w = generated(
        ArrivalSpec::constant(4.0),
        5,
        LengthSpec::fixed(1),
        LengthSpec::fixed(1),
    );
    let t: Vec<u64> = w
        .generate(0, MML)
        .unwrap()
        .iter()
        .map(|r| r.arrival_ns)
        .collect();
    assert_eq!(
        t,
        vec![0, 250_000_000, 500_000_000, 750_000_000, 1_000_000_000]
    );

    let mut a = ArrivalSpec::poisson(1.0);
    a.max_gap_s = Some(3.0);
    let w = generated(a, 50_000, LengthSpec::fixed(1), LengthSpec::fixed(1));
    let reqs = w.generate(8, MML).unwrap();
    let gaps = gaps_s(&reqs);
    assert!(gaps.iter().all(|g| *g <= 3.0 + 1e-9));
    assert!(
        gaps.iter().any(|g| (*g - 3.0).abs() < 1e-9),
        "some gap should hit the cap"
    );
}

#[test]
fn duration_mode() {
    let w = WorkloadSpec {
        arrival: Some(ArrivalSpec::poisson(100.0)),
        num_requests: None,
        duration_s: Some(50.0),
        prompt: Some(LengthSpec::fixed(3)),
        output: Some(LengthSpec::fixed(4)),
        priority: Some(-2),
        ..WorkloadSpec::empty()
    };
    assert_eq!(w.num_requests_hint(), None);
    let reqs = w.generate(9, MML).unwrap();
    assert!(reqs
        .iter()
        .all(|r| r.arrival_ns < 50_000_000_000 && r.priority == -2));
    assert!((4700..=5300).contains(&reqs.len()), "{}", reqs.len());
    assert!(reqs.iter().enumerate().all(|(i, r)| r.id == i as u32));

    let c = WorkloadSpec {
        arrival: Some(ArrivalSpec::constant(2.0)),
        duration_s: Some(2.0),
        ..w
    };
    assert_eq!(c.generate(0, MML).unwrap().len(), 4); // t = 0, 0.5, 1.0, 1.5
}

#[test]
fn lognormal_mean() {
    let w = generated(
        ArrivalSpec::poisson(1.0),
        200_000,
        LengthSpec::lognormal(500.0, 1.0),
        LengthSpec::fixed(1),
    );
    let xs: Vec<f64> = w
        .generate(10, MML)
        .unwrap()
        .iter()
        .map(|r| f64::from(r.prompt_tokens))
        .collect();
    let (mean, _) = mean_cv(&xs);
    assert!((mean - 500.0).abs() / 500.0 < 0.03, "mean {mean}");
}

#[test]
fn normal_and_uniform_moments() {
    let w = generated(
        ArrivalSpec::poisson(1.0),
        100_000,
        LengthSpec::normal(1000.0, 100.0),
        LengthSpec::uniform(10, 20),
    );
    let reqs = w.generate(10, MML).unwrap();
    let p: Vec<f64> = reqs.iter().map(|r| f64::from(r.prompt_tokens)).collect();
    let (mean, cv) = mean_cv(&p);
    assert!(
        (mean - 1000.0).abs() < 2.0 && (cv - 0.1).abs() < 0.005,
        "{mean} {cv}"
    );
    let mut seen = [0u32; 11];
    for r in &reqs {
        seen[(r.output_tokens - 10) as usize] += 1;
    }
    assert!(seen.iter().all(|c| (8_500..=9_700).contains(c)), "{seen:?}");
}

#[test]
fn zipf_support_and_mode() {
    for &(min, max, s) in &[
        (1u32, 50u32, 1.0),
        (5, 40, 1.5),
        (3, 10_000_000, 0.7),
        (2, 2, 3.0),
    ] {
        let w = generated(
            ArrivalSpec::poisson(1.0),
            50_000,
            LengthSpec::zipf(min, max, s),
            LengthSpec::fixed(1),
        );
        let reqs = w.generate(13, MML).unwrap();
        assert!(reqs.iter().all(|r| (min..=max).contains(&r.prompt_tokens)));
        let mut counts = std::collections::BTreeMap::new();
        for r in &reqs {
            *counts.entry(r.prompt_tokens).or_insert(0u32) += 1;
        }
        let mode = counts
            .iter()
            .max_by_key(|(k, c)| (**c, std::cmp::Reverse(**k)))
            .map(|(k, _)| *k)
            .unwrap();
        assert_eq!(mode, min, "support {min}..={max} s={s}");
    }
}

#[test]
fn zipf_matches_pmf() {
    let (min, max, s) = (3u32, 12u32, 1.2);
    let z = Zipf::new(min, max, s);
    let mut rng = SimRng::new(77);
    let n = 200_000;
    let mut counts = [0u32; 10];
    for _ in 0..n {
        counts[(z.sample(&mut rng) - min) as usize] += 1;
    }
    let weights: Vec<f64> = (min..=max).map(|k| libm::pow(f64::from(k), -s)).collect();
    let total: f64 = weights.iter().sum();
    for (i, w) in weights.iter().enumerate() {
        let p = w / total;
        let got = f64::from(counts[i]) / n as f64;
        let sd = (p * (1.0 - p) / n as f64).sqrt();
        assert!(
            (got - p).abs() < 5.0 * sd,
            "k={} got {got} want {p}",
            min + i as u32
        );
    }
}

#[test]
fn clamps_hold() {
    let cases = [
        LengthSpec::normal(100.0, 500.0).clamped(Some(20), Some(300)),
        LengthSpec::lognormal(100.0, 2.0).clamped(Some(5), Some(150)),
        LengthSpec::fixed(1000).clamped(None, Some(64)),
        LengthSpec::fixed(3).clamped(Some(8), None),
        LengthSpec::normal(1.0, 50.0),
    ];
    let bounds = [(20, 300), (5, 150), (64, 64), (8, 8), (1, u32::MAX)];
    for (len, (lo, hi)) in cases.iter().zip(bounds) {
        let w = generated(
            ArrivalSpec::poisson(1.0),
            5_000,
            len.clone(),
            LengthSpec::fixed(1),
        );
        let reqs = w.generate(14, MML).unwrap();
        assert!(
            reqs.iter()
                .all(|r| r.prompt_tokens >= lo && r.prompt_tokens <= hi),
            "{len:?}"
        );
        if lo != hi {
            assert!(
                reqs.iter().any(|r| r.prompt_tokens == lo),
                "{len:?} never hits lo"
            );
        }
    }
}

#[test]
fn explicit_list_keeps_ids_and_sorts() {
    let mut reqs = vec![
        ExplicitRequest::new(20.0, 10, 5),
        ExplicitRequest::new(0.0, 11, 6),
        ExplicitRequest::new(20.0, 12, 7),
        ExplicitRequest::new(1.5, 13, 8),
    ];
    reqs[3].priority = Some(-1);
    let w = WorkloadSpec::explicit(reqs);
    assert_eq!(w.num_requests_hint(), Some(4));
    let out = w.generate(123, MML).unwrap();
    let ids: Vec<u32> = out.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![1, 3, 0, 2]);
    assert_eq!(
        out[1],
        RequestSpec::new(3, 1_500_000, 13, 8, -1)
    );
    assert_eq!(out[2].arrival_ns, 20_000_000);
    // The seed does not matter for an explicit list.
    assert_eq!(out, w.generate(9, MML).unwrap());
}

#[test]
fn explicit_too_long_for_model() {
    let w = WorkloadSpec::explicit(vec![
        ExplicitRequest::new(0.0, 10, 5),
        ExplicitRequest::new(0.0, 100, 29),
    ]);
    let err = w.generate(0, 128).unwrap_err();
    assert_eq!(err.path(), Some("requests[1].prompt_tokens"));
    assert!(w.generate(0, 129).is_ok());
    assert_eq!(
        w.validate(128).unwrap_err().path(),
        Some("requests[1].prompt_tokens")
    );
    let under = w.validate(128).unwrap_err().under("workload");
    assert_eq!(under.path(), Some("workload.requests[1].prompt_tokens"));
}

#[test]
fn bad_inputs_name_their_path() {
    let ok = WorkloadSpec::default();
    let with = |f: &dyn Fn(&mut WorkloadSpec)| {
        let mut w = ok.clone();
        f(&mut w);
        err_path(&w)
    };
    let arr = |f: &dyn Fn(&mut ArrivalSpec)| {
        with(&|w: &mut WorkloadSpec| f(w.arrival.as_mut().unwrap()))
    };
    let prompt = |l: LengthSpec| with(&|w: &mut WorkloadSpec| w.prompt = Some(l.clone()));

    // Arrival.
    assert_eq!(arr(&|a| a.rate = Some(0.0)), "arrival.rate");
    assert_eq!(arr(&|a| a.rate = Some(-1.0)), "arrival.rate");
    assert_eq!(arr(&|a| a.rate = Some(f64::NAN)), "arrival.rate");
    assert_eq!(arr(&|a| a.rate = Some(f64::INFINITY)), "arrival.rate");
    assert_eq!(arr(&|a| a.rate = None), "arrival.rate");
    assert_eq!(arr(&|a| a.kind = None), "arrival.kind");
    assert_eq!(arr(&|a| a.kind = Some("poison".into())), "arrival.kind");
    assert_eq!(arr(&|a| a.cv = Some(1.0)), "arrival.cv");
    assert_eq!(
        arr(&|a| *a = ArrivalSpec {
            cv: None,
            ..ArrivalSpec::gamma(1.0, 1.0)
        }),
        "arrival.cv"
    );
    assert_eq!(arr(&|a| *a = ArrivalSpec::gamma(1.0, 0.0)), "arrival.cv");
    assert_eq!(
        arr(&|a| *a = ArrivalSpec::gamma(1.0, f64::NAN)),
        "arrival.cv"
    );
    assert_eq!(arr(&|a| *a = ArrivalSpec::gamma(1.0, 1e-200)), "arrival.cv");
    assert_eq!(arr(&|a| a.max_gap_s = Some(0.0)), "arrival.max_gap_s");
    assert_eq!(arr(&|a| a.max_gap_s = Some(f64::NAN)), "arrival.max_gap_s");

    // Count / duration.
    assert_eq!(with(&|w| w.num_requests = Some(0)), "num_requests");
    assert_eq!(
        with(&|w| w.num_requests = Some(MAX_REQUESTS + 1)),
        "num_requests"
    );
    assert_eq!(with(&|w| w.duration_s = Some(10.0)), "duration_s");
    assert_eq!(with(&|w| w.num_requests = None), "num_requests");
    let dur = |d: f64, rate: f64| {
        with(&|w| {
            w.num_requests = None;
            w.duration_s = Some(d);
            w.arrival = Some(ArrivalSpec::poisson(rate));
        })
    };
    assert_eq!(dur(0.0, 1.0), "duration_s");
    assert_eq!(dur(-5.0, 1.0), "duration_s");
    assert_eq!(dur(f64::NAN, 1.0), "duration_s");
    assert_eq!(dur(1e6, 100.0), "duration_s"); // 1e8 expected requests
    assert_eq!(
        with(&|w| {
            w.num_requests = None;
            w.duration_s = Some(1e3);
            w.arrival = Some(ArrivalSpec {
                max_gap_s: Some(1e-6),
                ..ArrivalSpec::poisson(1.0)
            });
        }),
        "duration_s"
    );

    // Missing sections.
    assert_eq!(with(&|w| w.arrival = None), "arrival");
    assert_eq!(with(&|w| w.prompt = None), "prompt");
    assert_eq!(with(&|w| w.output = None), "output");

    // Lengths.
    assert_eq!(prompt(LengthSpec::fixed(0)), "prompt.value");
    assert_eq!(
        prompt(LengthSpec {
            value: None,
            ..LengthSpec::fixed(1)
        }),
        "prompt.value"
    );
    assert_eq!(
        prompt(LengthSpec {
            kind: None,
            ..LengthSpec::fixed(1)
        }),
        "prompt.kind"
    );
    assert_eq!(
        prompt(LengthSpec {
            kind: Some("fixd".into()),
            ..LengthSpec::fixed(1)
        }),
        "prompt.kind"
    );
    assert_eq!(
        prompt(LengthSpec {
            mean: Some(3.0),
            ..LengthSpec::fixed(1)
        }),
        "prompt.mean"
    );
    assert_eq!(
        prompt(LengthSpec::fixed(5).clamped(Some(10), Some(4))),
        "prompt.max"
    );
    assert_eq!(
        prompt(LengthSpec::fixed(5).clamped(Some(0), None)),
        "prompt.min"
    );
    assert_eq!(prompt(LengthSpec::uniform(10, 5)), "prompt.max");
    assert_eq!(prompt(LengthSpec::uniform(0, 5)), "prompt.min");
    assert_eq!(
        prompt(LengthSpec {
            max: None,
            ..LengthSpec::uniform(1, 5)
        }),
        "prompt.max"
    );
    assert_eq!(prompt(LengthSpec::normal(100.0, -1.0)), "prompt.std");
    assert_eq!(prompt(LengthSpec::normal(f64::NAN, 1.0)), "prompt.mean");
    assert_eq!(
        prompt(LengthSpec::normal(100.0, f64::INFINITY)),
        "prompt.std"
    );
    assert_eq!(
        prompt(LengthSpec {
            std: None,
            ..LengthSpec::normal(1.0, 1.0)
        }),
        "prompt.std"
    );
    assert_eq!(
        prompt(LengthSpec {
            sigma: Some(1.0),
            ..LengthSpec::normal(1.0, 1.0)
        }),
        "prompt.sigma"
    );
    assert_eq!(prompt(LengthSpec::lognormal(100.0, -0.1)), "prompt.sigma");
    assert_eq!(prompt(LengthSpec::lognormal(0.0, 0.5)), "prompt.mean");
    assert_eq!(prompt(LengthSpec::lognormal(100.0, 1e200)), "prompt.sigma");
    assert_eq!(prompt(LengthSpec::zipf(1, 100, 0.0)), "prompt.s");
    assert_eq!(prompt(LengthSpec::zipf(1, 100, f64::NAN)), "prompt.s");
    assert_eq!(prompt(LengthSpec::zipf(50, 10, 1.0)), "prompt.max");
    assert_eq!(prompt(LengthSpec::zipf(0, 10, 1.0)), "prompt.min");
    assert_eq!(
        with(&|w| w.output = Some(LengthSpec::fixed(0))),
        "output.value"
    );

    // Explicit list.
    let ex = |reqs: Vec<ExplicitRequest>| err_path(&WorkloadSpec::explicit(reqs));
    let good = ExplicitRequest::new(0.0, 1, 1);
    assert_eq!(ex(vec![]), "requests");
    assert_eq!(
        ex(vec![good.clone(), ExplicitRequest::new(-1.0, 1, 1)]),
        "requests[1].arrival_ms"
    );
    assert_eq!(
        ex(vec![ExplicitRequest::new(f64::NAN, 1, 1)]),
        "requests[0].arrival_ms"
    );
    assert_eq!(
        ex(vec![ExplicitRequest::new(f64::INFINITY, 1, 1)]),
        "requests[0].arrival_ms"
    );
    assert_eq!(
        ex(vec![
            good.clone(),
            good.clone(),
            ExplicitRequest::new(0.0, 0, 1)
        ]),
        "requests[2].prompt_tokens"
    );
    assert_eq!(
        ex(vec![ExplicitRequest::new(0.0, 1, 0)]),
        "requests[0].output_tokens"
    );
    assert_eq!(
        ex(vec![ExplicitRequest {
            prompt_tokens: None,
            ..good.clone()
        }]),
        "requests[0].prompt_tokens"
    );
    assert_eq!(
        ex(vec![ExplicitRequest {
            output_tokens: None,
            ..good.clone()
        }]),
        "requests[0].output_tokens"
    );
    assert_eq!(
        ex(vec![ExplicitRequest {
            arrival_ms: None,
            ..good.clone()
        }]),
        "requests[0].arrival_ms"
    );

    // Mixing the two forms.
    let mixed = WorkloadSpec {
        requests: Some(vec![good.clone()]),
        ..WorkloadSpec::default()
    };
    assert_eq!(err_path(&mixed), "arrival");
    let mixed = WorkloadSpec {
        priority: Some(1),
        ..WorkloadSpec::explicit(vec![good.clone()])
    };
    assert_eq!(err_path(&mixed), "priority");
    let mixed = WorkloadSpec {
        duration_s: Some(1.0),
        ..WorkloadSpec::explicit(vec![good])
    };
    assert_eq!(err_path(&mixed), "duration_s");
}

#[test]
fn nan_message() {
    let mut w = WorkloadSpec::default();
    w.arrival.as_mut().unwrap().rate = Some(f64::NAN);
    let err = w.validate(MML).unwrap_err();
    assert_eq!(
        err.to_string(),
        "arrival.rate: must be a finite number (got NaN)"
    );
    let err = err.under("workload");
    assert_eq!(err.path(), Some("workload.arrival.rate"));
}

#[test]
fn unknown_kind_suggests() {
    let mut w = WorkloadSpec::default();
    w.arrival.as_mut().unwrap().kind = Some("poison".into());
    let msg = w.validate(MML).unwrap_err().to_string();
    assert!(msg.contains("did you mean poisson"), "{msg}");
}

#[test]
fn parse_json() {
    let json = r#"{
        "arrival": {"kind": "gamma", "rate": 2, "cv": 3.0, "max_gap_s": 1.5},
        "duration_s": 60,
        "prompt": {"kind": "lognormal", "mean": 800, "sigma": 0.5, "max": 4000},
        "output": {"kind": "zipf", "min": 1, "max": 1000, "s": 1.1},
        "priority": 3
    }"#;
    let w: WorkloadSpec = serde_json::from_str(json).unwrap();
    assert_eq!(
        w.arrival,
        Some(ArrivalSpec {
            max_gap_s: Some(1.5),
            ..ArrivalSpec::gamma(2.0, 3.0)
        })
    );
    assert_eq!(w.duration_s, Some(60.0));
    assert_eq!(
        w.prompt,
        Some(LengthSpec::lognormal(800.0, 0.5).clamped(None, Some(4000)))
    );
    assert_eq!(w.priority, Some(3));
    w.validate(MML).unwrap();
    let reqs = w.generate(1, MML).unwrap();
    assert!(
        !reqs.is_empty()
            && reqs
                .iter()
                .all(|r| r.priority == 3 && r.prompt_tokens <= 4000)
    );

    // Round trip through Serialize (the resolved scenario is echoed back).
    let echoed = serde_json::to_string(&w).unwrap();
    assert!(!echoed.contains("null"), "{echoed}");
    let back: WorkloadSpec = serde_json::from_str(&echoed).unwrap();
    assert_eq!(back, w);

    let explicit = r#"{"requests": [
        {"arrival_ms": 5, "prompt_tokens": 10, "output_tokens": 2, "priority": -1},
        {"arrival_ms": 0.25, "prompt_tokens": 20, "output_tokens": 4}
    ]}"#;
    let w: WorkloadSpec = serde_json::from_str(explicit).unwrap();
    let reqs = w.generate(0, MML).unwrap();
    assert_eq!(
        reqs[0],
        RequestSpec::new(1, 250_000, 20, 4, 0)
    );
    assert_eq!(reqs[1].priority, -1);

    let d = WorkloadSpec::default();
    let back: WorkloadSpec = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
    assert_eq!(back, d);
}

#[test]
fn parse_toml() {
    let text = r#"
        num_requests = 10
        [arrival]
        kind = "poisson"
        rate = 5
        [prompt]
        kind = "uniform"
        min = 10
        max = 20
        [output]
        kind = "normal"
        mean = 100.0
        std = 10
        min = 50
    "#;
    let w: WorkloadSpec = toml::from_str(text).unwrap();
    assert_eq!(w.arrival, Some(ArrivalSpec::poisson(5.0)));
    assert_eq!(
        w.output,
        Some(LengthSpec::normal(100.0, 10.0).clamped(Some(50), None))
    );
    assert_eq!(w.generate(2, MML).unwrap().len(), 10);

    let explicit = r#"
        [[requests]]
        arrival_ms = 1.0
        prompt_tokens = 3
        output_tokens = 4
    "#;
    let w: WorkloadSpec = toml::from_str(explicit).unwrap();
    assert_eq!(w.generate(0, MML).unwrap().len(), 1);

    // TOML can spell NaN; validation names the field.
    let nan = "num_requests = 1\n[arrival]\nkind = \"poisson\"\nrate = nan\n[prompt]\nkind = \"fixed\"\nvalue = 1\n[output]\nkind = \"fixed\"\nvalue = 1\n";
    let w: WorkloadSpec = toml::from_str(nan).unwrap();
    let err = w.validate(MML).unwrap_err();
    assert_eq!(err.path(), Some("arrival.rate"));
    assert!(
        err.to_string()
            .contains("must be a finite number (got NaN)"),
        "{err}"
    );
}

#[test]
fn unknown_fields_rejected() {
    let cases = [
        r#"{"arival": {"kind": "poisson", "rate": 1}}"#,
        r#"{"arrival": {"kind": "poisson", "rate": 1, "burst": 2}}"#,
        r#"{"requests": [{"arrival_ms": 0, "prompt_tokens": 1, "output_tokens": 1, "x": 1}]}"#,
        r#"{"prompt": {"kind": "fixed", "value": 1, "avg": 3}}"#,
    ];
    for c in cases {
        let err = serde_json::from_str::<WorkloadSpec>(c)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field"), "{c}: {err}");
    }
    assert!(toml::from_str::<WorkloadSpec>("foo = 1").is_err());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn clamp_pair() -> impl Strategy<Value = (Option<u32>, Option<u32>)> {
        (
            proptest::option::of(1u32..500),
            proptest::option::of(1u32..5000),
        )
            .prop_map(|(lo, hi)| match (lo, hi) {
                (Some(l), Some(h)) if l > h => (Some(h), Some(l)),
                other => other,
            })
    }

    fn length() -> impl Strategy<Value = LengthSpec> {
        prop_oneof![
            (1u32..10_000, clamp_pair())
                .prop_map(|(v, (lo, hi))| LengthSpec::fixed(v).clamped(lo, hi)),
            (1u32..1000, 0u32..1000).prop_map(|(a, d)| LengthSpec::uniform(a, a + d)),
            (-100.0f64..2000.0, 0.0f64..1000.0, clamp_pair())
                .prop_filter("mean > 0", |(m, _, _)| *m > 0.0)
                .prop_map(|(m, s, (lo, hi))| LengthSpec::normal(m, s).clamped(lo, hi)),
            (0.5f64..5000.0, 0.0f64..4.0, clamp_pair())
                .prop_map(|(m, s, (lo, hi))| LengthSpec::lognormal(m, s).clamped(lo, hi)),
            (1u32..1000, 0u32..2_000_000, 0.01f64..5.0).prop_map(|(a, d, s)| LengthSpec::zipf(
                a,
                a + d,
                s
            )),
        ]
    }

    fn arrival() -> impl Strategy<Value = ArrivalSpec> {
        (
            0u8..3,
            0.01f64..1000.0,
            0.1f64..5.0,
            proptest::option::of(0.001f64..10.0),
        )
            .prop_map(|(k, rate, cv, cap)| {
                let mut a = match k {
                    0 => ArrivalSpec::poisson(rate),
                    1 => ArrivalSpec::gamma(rate, cv),
                    _ => ArrivalSpec::constant(rate),
                };
                a.max_gap_s = cap;
                a
            })
    }

    fn bounds(l: &LengthSpec) -> (u32, u32) {
        (l.min.unwrap_or(1).max(1), l.max.unwrap_or(u32::MAX))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn generated_requests_respect_bounds(
            a in arrival(), p in length(), o in length(), n in 1u64..300, seed in any::<u64>()
        ) {
            let w = generated(a, n, p.clone(), o.clone());
            w.validate(MML).unwrap();
            let reqs = w.generate(seed, MML).unwrap();
            prop_assert_eq!(reqs.len() as u64, n);
            prop_assert_eq!(reqs[0].arrival_ns, 0);
            let (plo, phi) = bounds(&p);
            let (olo, ohi) = bounds(&o);
            for (i, r) in reqs.iter().enumerate() {
                prop_assert_eq!(r.id, i as u32);
                prop_assert!(r.prompt_tokens >= 1 && r.prompt_tokens >= plo && r.prompt_tokens <= phi);
                prop_assert!(r.output_tokens >= 1 && r.output_tokens >= olo && r.output_tokens <= ohi);
            }
            prop_assert!(reqs.windows(2).all(|w| w[0].arrival_ns <= w[1].arrival_ns));
        }
    }
}
