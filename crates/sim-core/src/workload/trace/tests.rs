//! Tests of trace parsing: every format, fed whole and in pieces, and every rule.
use super::*;
use crate::workload::{output_key, RequestSpec, Workload};

fn spec(format: &str) -> TraceSpec {
    TraceSpec { format: Some(format.into()), ..Default::default() }
}

/// Parse `text` with `spec`, feeding it in chunks of `chunk` bytes.
fn load_chunked(spec: &TraceSpec, text: &str, chunk: usize) -> Result<LoadedTrace> {
    let mut r = TraceReader::new(spec)?;
    for piece in text.as_bytes().chunks(chunk.max(1)) {
        if !r.feed(piece)? {
            break;
        }
    }
    r.finish()
}

fn load(spec: &TraceSpec, text: &str) -> Workload {
    load_chunked(spec, text, usize::MAX).unwrap().into_workload(1).unwrap()
}

fn err(spec: &TraceSpec, text: &str) -> String {
    let e = load_chunked(spec, text, 7).and_then(|t| t.into_workload(1)).expect_err("should fail");
    assert_eq!(e.kind_name(), "ConfigError");
    e.to_string()
}

fn triples(w: &Workload) -> Vec<(u64, u32, u32)> {
    w.requests.iter().map(|r| (r.arrival_ns / 1_000_000, r.prompt_tokens, r.output_tokens)).collect()
}

const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens\n\
2023-11-16 18:17:03.9799600,4808,10\n\
2023-11-16 18:17:04.0319600,3180,8\n\
2023-11-16 18:17:05.5000000,100,1\n";

#[test]
fn azure_times_are_relative_to_the_first_row() {
    let w = load(&spec("azure"), AZURE);
    assert_eq!(triples(&w), [(0, 4808, 10), (52, 3180, 8), (1520, 100, 1)]);
    assert!(w.segments.is_empty() && w.requests.iter().all(|r| r.segs == (0, 0) && r.after.is_none()));
    // The 2024 files write an offset; auto finds the format from the header.
    let w24 = load(&spec("auto"), "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.5+00:00,5,6\n2024-05-10 00:00:01.5+00:00,7,8\n");
    assert_eq!(triples(&w24), [(0, 5, 6), (1000, 7, 8)]);
}

#[test]
fn any_chunking_gives_the_same_workload() {
    let moon = "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n\
                {\"timestamp\": 3000, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [1, 9]}\n";
    for (s, text) in [(spec("azure"), AZURE), (spec("mooncake"), moon), (spec("auto"), moon)] {
        let whole = load(&s, text);
        for chunk in [1, 2, 3, 5, 17] {
            assert_eq!(load_chunked(&s, text, chunk).unwrap().into_workload(1).unwrap(), whole, "chunk {chunk}");
        }
    }
}

#[test]
fn mooncake_hash_ids_become_shared_blocks() {
    let text = "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n\
                {\"timestamp\": 3000, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [1, 9], \"extra\": true}\n";
    let w = load(&spec("mooncake"), text);
    assert_eq!(triples(&w), [(0, 1100, 5), (3000, 600, 7)]);
    let segs = |r: &RequestSpec| w.segments[r.segs.0 as usize..(r.segs.0 + r.segs.1) as usize].to_vec();
    let (a, b) = (segs(&w.requests[0]), segs(&w.requests[1]));
    assert_eq!(a.iter().map(|s| s.len).collect::<Vec<_>>(), [512, 512, 76]);
    assert_eq!(b.iter().map(|s| s.len).collect::<Vec<_>>(), [512, 88]);
    assert_eq!(a[0].key, b[0].key, "equal ids, equal content");
    assert_ne!(a[1].key, b[1].key);
    // Another block size changes the count that must match.
    let s = TraceSpec { hash_block_tokens: Some(256), ..spec("mooncake") };
    assert!(err(&s, text).contains("3 ids for a prompt of 1100 tokens; with hash_block_tokens = 256 it spans 5 blocks"));
}

#[test]
fn formats_read_their_own_columns() {
    let vidur = "arrived_at,num_prefill_tokens,num_decode_tokens,pd_ratio\n0.0,100,10,1\n0.25,200.0,20,1\n";
    assert_eq!(triples(&load(&spec("auto"), vidur)), [(0, 100, 10), (250, 200, 20)]);

    // BLIS trace v2: input_tokens follow the group's prefix; send_time_us wins when set.
    let blis = "request_id,client_id,tenant_id,slo_class,session_id,round_index,prefix_group,prefix_length,streaming,input_tokens,output_tokens,arrival_time_us,send_time_us,server_input_tokens\n\
                0,c,t,standard,,0,sys,64,true,100,10,1000,0,0\n\
                1,c,t,standard,,0,sys,64,true,50,5,2000,2500,0\n\
                2,c,t,standard,,0,,0,true,30,3,3000,0,35\n";
    let w = load(&spec("auto"), blis);
    assert_eq!(w.requests.iter().map(|r| (r.arrival_ns / 1000, r.prompt_tokens)).collect::<Vec<_>>(), [(0, 164), (1500, 114), (2000, 35)]);
    let first = |r: &RequestSpec| w.segments[r.segs.0 as usize];
    assert_eq!(first(&w.requests[0]), first(&w.requests[1]));
    assert_eq!(first(&w.requests[0]).len, 64);

    // vLLM result with start times (failed requests left out), and without (generated).
    let vllm = r#"{"request_rate": 4.0, "burstiness": 1.0, "input_lens": [10, 20, 30], "output_lens": [1, 2, 0],
        "start_times": [100.5, 100.0, 101.0], "errors": ["", "", "timeout"], "generated_texts": ["a", "b", ""]}"#;
    assert_eq!(triples(&load(&spec("auto"), vllm)), [(0, 20, 2), (500, 10, 1)]);
    let no_times = r#"{"request_rate": "inf", "input_lens": [10, 20], "output_lens": [1, 2]}"#;
    assert_eq!(triples(&load(&spec("vllm"), no_times)), [(0, 10, 1), (0, 20, 2)]);
    let rated = load(&spec("vllm"), r#"{"request_rate": 2, "input_lens": [1, 1, 1, 1], "output_lens": [1, 1, 1, 1]}"#);
    assert!(rated.requests.windows(2).all(|w| w[1].arrival_ns >= w[0].arrival_ns) && rated.requests[3].arrival_ns > 0);
    assert!(err(&spec("vllm"), r#"{"request_rate": 1}"#).contains("input_lens: missing (vLLM saves the per-request lengths only with --save-detailed)"));

    // inference-perf per-request report: listed as they finished, sorted here; a failure is dropped.
    let ip = r#"[
      {"start_time": 1700000001.5, "end_time": 1700000002.0, "request": "{}", "info": {"input_tokens": 12, "output_tokens": 3}, "error": null},
      {"start_time": 1700000001.0, "end_time": 1700000003.0, "request": "{\"a\": \"]}\"}", "info": {"input_tokens": 10, "response_metrics": {"output_tokens": 4}}, "error": null},
      {"start_time": 1700000001.2, "end_time": 1700000001.3, "request": "{}", "info": {"input_tokens": 9, "output_tokens": 0}, "error": {"error_type": "x", "error_msg": "y"}}
    ]"#;
    assert_eq!(triples(&load(&spec("auto"), ip)), [(0, 10, 4), (500, 12, 3)]);
}

#[test]
fn plain_csv_and_jsonl_take_named_or_mapped_columns() {
    let csv = "arrival_s,prompt_tokens,output_tokens,prefix_group,prefix_length,priority\n0,100,5,sys,40,1\n0.5,90,6,sys,40,\n";
    let w = load(&spec("csv"), csv);
    assert_eq!(triples(&w), [(0, 100, 5), (500, 90, 6)]);
    assert_eq!(w.requests[0].priority, 1);
    assert_eq!(w.segments.len(), 2);
    assert_eq!(w.segments[0], w.segments[1]);

    let mapped = TraceSpec {
        columns: Some([("arrival".to_string(), "ts".to_string()), ("prompt_tokens".to_string(), "in".to_string())].into()),
        time_unit: Some("us".into()),
        ..spec("jsonl")
    };
    let jsonl = "{\"ts\": 0, \"in\": 3, \"output_tokens\": 1}\n\n{\"ts\": 2000, \"in\": 4, \"output_tokens\": 2}\n";
    assert_eq!(triples(&load(&mapped, jsonl)), [(0, 3, 1), (2, 4, 2)]);

    let hashes = "arrival_ms,prompt_tokens,output_tokens,hash_ids\n0,600,1,\"[7, 8]\"\n10,700,1,7 9\n";
    let s = TraceSpec { hash_block_tokens: Some(512), ..spec("csv") };
    let w = load(&s, hashes);
    assert_eq!(w.segments[0].key, w.segments[2].key);
}

#[test]
fn session_turns_in_a_trace_repeat_the_conversation() {
    let csv = "arrival_ms,prompt_tokens,output_tokens,session_id,turn,think_ms\n\
               0,100,20,a,0,\n\
               10,50,5,b,0,\n\
               900,180,30,a,1,250\n";
    let w = load(&spec("csv"), csv);
    let by_id = |id: u32| *w.requests.iter().find(|r| r.id == id).unwrap();
    let second = by_id(2);
    assert_eq!(second.after.map(|a| (a.parent, a.think_ns)), Some((0, 250_000_000)));
    let segs = &w.segments[second.segs.0 as usize..(second.segs.0 + second.segs.1) as usize];
    assert_eq!(segs.iter().map(|s| s.len).collect::<Vec<_>>(), [100, 20, 60]);
    assert_eq!(segs[1].key, output_key(0));
    assert_eq!(w.segments[by_id(0).segs.0 as usize], segs[0]);
    let short = "arrival_ms,prompt_tokens,output_tokens,session_id\n0,100,20,a\n5,110,1,a\n";
    assert!(err(&spec("csv"), short).contains("line 3: prompt_tokens: 110 is shorter than session 'a' so far"));
}

#[test]
fn window_max_requests_and_rate_scale() {
    let csv = "arrival_s,prompt_tokens,output_tokens\n10,1,1\n11,2,1\n12,3,1\n13,4,1\n14,5,1\n";
    let s = TraceSpec { start_s: Some(1.0), window_s: Some(2.5), ..spec("csv") };
    assert_eq!(triples(&load(&s, csv)), [(0, 2, 1), (1000, 3, 1), (2000, 4, 1)]);
    let s = TraceSpec { max_requests: Some(2), rate_scale: Some(4.0), ..spec("csv") };
    assert_eq!(triples(&load(&s, csv)), [(0, 1, 1), (250, 2, 1)]);
    // A reader that has what it needs asks for no more input.
    let mut r = TraceReader::new(&TraceSpec { max_requests: Some(1), ..spec("csv") }).unwrap();
    assert!(!r.feed(csv.as_bytes()).unwrap());
    assert_eq!(r.finish().unwrap().len(), 1);
    let s = TraceSpec { start_s: Some(100.0), ..spec("csv") };
    assert!(err(&s, csv).contains("none of its 5 rows falls in the window"));
}

#[test]
fn line_numbers_count_crlf_and_blank_lines() {
    let crlf = "arrival_ms,prompt_tokens,output_tokens\r\n0,1,1\r\n\r\n5,0,1\r\n";
    assert!(err(&spec("csv"), crlf).contains("line 4: prompt_tokens: must be >= 1 token (got 0)"), "{}", err(&spec("csv"), crlf));
    let lf = "arrival_ms,prompt_tokens,output_tokens\n0,1,1\n5,1,1\n3,1,1";
    assert!(err(&spec("csv"), lf).contains("line 4: arrival_ms: goes back in time"), "{}", err(&spec("csv"), lf));
}

#[test]
fn a_file_that_is_no_trace_is_not_echoed() {
    // A server's /etc/passwd named as a csv trace: the error names what is missing, and
    // no cell of it that is not a column name.
    let passwd = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n";
    let e = err(&spec("csv"), passwd);
    assert!(e.contains("line 1: missing column") && e.contains("found: ?"), "{e}");
    assert!(!e.contains("root") && !e.contains("/bin"), "{e}");
}

#[test]
fn bad_traces_name_the_line_and_the_field() {
    let cases: &[(&str, &str, &str)] = &[
        ("azur", AZURE, "trace.format: unknown trace format 'azur'; did you mean azure"),
        ("azure", "TIMESTAMP,Context,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\n", "missing column `ContextTokens` (format azure needs TIMESTAMP, ContextTokens, GeneratedTokens; found: TIMESTAMP, Context, GeneratedTokens)"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.9,1,1\n2023-11-16 18:17:02.9,1,1\n", "line 3: TIMESTAMP: goes back in time: -1 s after the first row, before line 2's 0 s"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,1\n", "line 2: TIMESTAMP: expected a date and time"),
        ("azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "trace: the trace has no requests"),
        ("auto", "", "trace: the trace is empty"),
        ("auto", "  \n\n", "trace: the trace is empty"),
        ("mooncake", "{\"timestamp\": -5, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": [1]}\n", "line 1: timestamp: must be >= 0 (got -5 ms)"),
        ("mooncake", "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": [1, \"x\"]}\n", "line 1: hash_ids[1]: invalid type: string \"x\""),
        ("mooncake", "{\"timestamp\": 0, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": 4}\n", "line 1: hash_ids: invalid type: integer `4`, expected a sequence"),
        ("mooncake", "{\"timestamp\": 0, \"input_length\": 1025, \"output_length\": 1, \"hash_ids\": [1, 2]}\n", "line 1: hash_ids: 2 ids for a prompt of 1025 tokens; with hash_block_tokens = 512 it spans 3 blocks"),
        ("mooncake", "{\"timestamp\": 0, \"output_length\": 1}\n", "line 1: missing field `input_length`"),
        ("mooncake", "{\"timestamp\": 0, \"input_length\": 3\n", "line 1: not a JSON object"),
        ("csv", "arrival_ms,prompt_tokens,output_tokens,prefix_group,prefix_length\n0,10,1,g,11\n", "line 2: prefix_length: must be in 1..=10"),
        ("csv", "arrival_ms,prompt_tokens\n0,10\n", "missing column `output_tokens`"),
        ("csv", "arrival_ms,prompt_tokens,output_tokens,turn\n0,10,1,2\n", "line 2: turn: needs a session column (`session_id`)"),
        ("inference_perf", "{\"a\": 1}", "line 1: expected a JSON array"),
        ("inference_perf", "[{\"start_time\": 1, \"info\": {\"input_tokens\": 1, \"output_tokens\": 1}}", "the JSON array is not closed"),
    ];
    for (format, text, want) in cases {
        let got = err(&spec(format), text);
        assert!(got.contains(want), "{format}: got {got:?}, want {want:?}");
    }
    let bad_option = |s: TraceSpec, path: &str| {
        let e = TraceReader::new(&s).err().expect("bad option");
        assert_eq!(e.path(), Some(path), "{e}");
    };
    bad_option(TraceSpec { rate_scale: Some(0.0), ..spec("csv") }, "trace.rate_scale");
    bad_option(TraceSpec { window_s: Some(-1.0), ..spec("csv") }, "trace.window_s");
    bad_option(TraceSpec { max_requests: Some(0), ..spec("csv") }, "trace.max_requests");
    bad_option(TraceSpec { hash_block_tokens: Some(0), ..spec("mooncake") }, "trace.hash_block_tokens");
    bad_option(TraceSpec { time_unit: Some("min".into()), ..spec("csv") }, "trace.time_unit");
    bad_option(TraceSpec { time_unit: Some("s".into()), ..spec("azure") }, "trace.time_unit");
    bad_option(TraceSpec { columns: Some([("arival".into(), "t".into())].into()), ..spec("csv") }, "trace.columns.arival");
}

#[test]
fn inline_text_and_paths() {
    let w = TraceSpec::inline("azure", AZURE).load_inline().unwrap();
    assert_eq!(w.format(), "azure");
    assert_eq!(w.len(), 3);
    let e = TraceSpec { path: Some("x.csv".into()), ..spec("azure") }.load_inline().unwrap_err();
    assert_eq!(e.path(), Some("trace.path"));
    let loaded = TraceSpec::inline("auto", AZURE).load_inline().unwrap();
    assert_eq!(loaded.format(), "azure");
    assert!(loaded.matches(&TraceSpec { path: Some("elsewhere".into()), ..spec("auto") }));
    assert!(!loaded.matches(&TraceSpec { rate_scale: Some(2.0), ..spec("auto") }));
}

#[test]
fn detect_format_by_first_line() {
    assert_eq!(detect_format(b"TIMESTAMP,ContextTokens,GeneratedTokens"), "azure");
    assert_eq!(detect_format(b"\xef\xbb\xbf\"TIMESTAMP\",\"ContextTokens\",\"GeneratedTokens\"\r"), "azure");
    assert_eq!(detect_format(b"{\"timestamp\": 0, \"input_length\": 1}"), "mooncake");
    assert_eq!(detect_format(b"{\"date\": \"x\", \"request_rate\": 1}"), "vllm");
    assert_eq!(detect_format(b"{"), "vllm");
    assert_eq!(detect_format(b"  ["), "inference_perf");
    assert_eq!(detect_format(b"{\"arrival_ms\": 1}"), "jsonl");
    assert_eq!(detect_format(b"arrived_at,num_prefill_tokens,num_decode_tokens"), "vidur");
    assert_eq!(detect_format(b"request_id,arrival_time_us,input_tokens"), "blis");
    assert_eq!(detect_format(b"arrival_ms,prompt_tokens,output_tokens"), "csv");
}

#[test]
fn datetimes_parse_to_utc_nanoseconds() {
    assert_eq!(formats::parse_datetime_ns("1970-01-01 00:00:00"), Ok(0));
    assert_eq!(formats::parse_datetime_ns("1970-01-02T00:00:01.5Z"), Ok(86_401_500_000_000));
    assert_eq!(formats::parse_datetime_ns("2000-03-01 00:00:00+01:00"), Ok((951_868_800 - 3600) * 1_000_000_000));
    assert_eq!(formats::parse_datetime_ns("2023-11-16 18:17:03.9799600"), Ok(1_700_158_623_979_960_000));
    assert!(formats::parse_datetime_ns("2023-13-16 18:17:03").is_err());
    assert!(formats::parse_datetime_ns("2023-11-16 18:17").is_err());
}

#[test]
fn mutated_traces_give_errors_never_panics() {
    let samples: &[(&str, &str)] = &[
        ("auto", AZURE),
        ("mooncake", "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}\n{\"timestamp\": 3000, \"input_length\": 600, \"output_length\": 7, \"hash_ids\": [1, 9]}\n"),
        ("auto", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,10\n0.25,200,20\n"),
        ("auto", "request_id,session_id,round_index,prefix_group,prefix_length,input_tokens,output_tokens,arrival_time_us,send_time_us,think_time_us\n0,s,0,g,10,100,10,1000,0,0\n1,s,1,,0,300,5,2000,0,500\n"),
        ("auto", "[{\"start_time\": 1.5, \"info\": {\"input_tokens\": 12, \"output_tokens\": 3, \"extra_info\": {\"user_session\": \"u\", \"chat_round\": 0}}, \"error\": null}]"),
        ("auto", "{\"request_rate\": 4.0, \"burstiness\": 2.0, \"input_lens\": [10, 20], \"output_lens\": [1, 2], \"errors\": [\"\", \"\"]}"),
        ("csv", "arrival_ms,prompt_tokens,output_tokens,session_id,turn,think_ms,prefix_group,prefix_length,hash_ids,priority\n0,100,20,a,0,,g,10,,1\n5,130,2,a,1,3,,,,\n9,600,1,,,,,,7 8,\n"),
    ];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let alphabet = b"0123456789-.e\",[]{}:\n\r xX";
    for (format, text) in samples {
        load(&spec(format), text); // the sample itself is valid
        for _ in 0..300 {
            let mut m = text.as_bytes().to_vec();
            for _ in 0..1 + next() % 3 {
                let at = (next() % m.len() as u64) as usize;
                match next() % 4 {
                    0 => {
                        m.remove(at);
                    }
                    1 => m[at] = alphabet[(next() % alphabet.len() as u64) as usize],
                    2 => m.insert(at, next() as u8),
                    _ => m.truncate(at.max(1)),
                }
            }
            let chunk = 1 + (next() % 9) as usize;
            let s = spec(format);
            let outcome = TraceReader::new(&s).and_then(|mut r| {
                for piece in m.chunks(chunk) {
                    if !r.feed(piece)? {
                        break;
                    }
                }
                r.finish()?.into_workload(3)
            });
            if let Err(e) = outcome {
                assert_eq!(e.kind_name(), "ConfigError", "{format}: {e}: {}", String::from_utf8_lossy(&m));
            }
        }
    }
}
