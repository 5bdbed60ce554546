//! Chat templates written to hurt whoever renders them (a template is code shipped inside
//! the model file): each render ends with a clean [`ChatError`] within a second, having
//! allocated a bounded amount of memory, and real templates still render under the same
//! default limits.
//!
//! The memory bound is measured with a counting global allocator, which is why these
//! cases live in a test binary of their own and run one after the other in one test.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

use rgml_models::chat::{ChatError, ChatTemplate, Message, RenderLimits};

/// The system allocator, counting the bytes live now and the most live since a reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are
// only arithmetic on the sizes it was asked for.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract is passed on unchanged.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            let now = LIVE.fetch_add(new_size, Relaxed) + new_size;
            PEAK.fetch_max(now, Relaxed);
            LIVE.fetch_sub(layout.size(), Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most bytes a hostile render may have live on top of what was live before it: the
/// default fuel pays for at most about `fuel × 64` bytes made in all, and a text growing to
/// that size has had a buffer of twice its capacity while it grew (the old one copied in).
const MEMORY_BOUND: usize = 3 * (RenderLimits::DEFAULT.fuel as usize) * 64;

/// Renders `source` over one user message; the result, the time taken and the peak of
/// the bytes allocated on top of those live before.
fn render(source: &str) -> (Result<String, ChatError>, Duration, usize) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let t0 = Instant::now();
    let result = ChatTemplate::new(source, "<s>", "</s>").and_then(|t| t.apply(&[Message::new("user", "hi")], true));
    let took = t0.elapsed();
    (result, took, PEAK.load(Relaxed).saturating_sub(base))
}

/// Templates that loop, double, recurse or print without end, and which limit each hits.
const HOSTILE: &[(&str, &str)] = &[
    // the two: ten thousand squared iterations printing text, and doing nothing
    (
        "nested loops printing",
        "{% for i in range(10000) %}{% for j in range(10000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}",
    ),
    ("nested empty loops", "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}"),
    (
        "string doubling through namespace()",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
    ),
    (
        "string doubling with +",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
    ),
    (
        "list doubling",
        "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}",
    ),
    (
        "replace doubling",
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s.replace('x', 'xx') %}{% endfor %}{{ ns.s|length }}",
    ),
    (
        "lazy list doubling",
        "{% set ns = namespace(l=range(10)|map('string')) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|list|length }}",
    ),
    (
        "a search through a doubled list",
        "{% set ns = namespace(l=[1]) %}{% for i in range(26) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ 5 in ns.l }}",
    ),
    ("lists summed", "{% set l = [[1] * 1000000] * 64 %}{{ l|sum(start=[])|length }}"),
    ("a str.format width of a gigabyte", "{{ '{:>1000000000}'.format('x')|length }}"),
    ("repeated string", "{{ ('x' * 1000000000000)|length }}"),
    ("unbounded macro recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
    (
        "exponential macro recursion",
        "{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}",
    ),
    ("a huge join", "{% set l = ['x' * 100000] * 100000 %}{{ l|join|length }}"),
    ("a huge join as a method", "{% set l = ['x' * 100000] * 100000 %}{{ ''.join(l)|length }}"),
    ("a list printed", "{{ ['x' * 100000] * 100000 }}"),
    ("a list made a string", "{{ (['x' * 100000] * 100000)|string|length }}"),
    ("a list trimmed", "{{ (['x' * 100000] * 100000)|trim|length }}"),
    ("a list as JSON", "{{ (['x' * 100000] * 100000)|tojson|length }}"),
    ("a JSON indent of a gigabyte", "{{ [[1]]|tojson(indent=1000000000)|length }}"),
    ("an exception's message", "{{ raise_exception(['x' * 100000] * 100000) }}"),
    ("a huge indent", "{{ 'a\nb'|indent(1000000000)|length }}"),
    ("a huge center", "{{ 'a'|center(1000000000)|length }}"),
    ("a huge format", "{{ ('%s' * 100000)|format(*(['x' * 100000] * 100000))|length }}"),
    ("sorting a long list", "{% for i in range(100) %}{{ (range(100000)|list * 10)|sort|length }}{% endfor %}"),
    ("a long list printed by pprint", "{{ (['x' * 100000] * 100000)|pprint|length }}"),
    // one long string referred to many times is as long as all of them once it is text
    ("a repeated list concatenated", "{% set l = ['x' * 100000] * 100000 %}{{ ('a' ~ l)|length }}"),
    ("a repeated list escaped", "{% set l = ['x' * 100000] * 100000 %}{{ l|escape|length }}"),
    ("a repeated list lowercased", "{% set l = ['x' * 100000] * 100000 %}{{ l|lower|length }}"),
    ("nested repetition", "{% set l = [[[['x' * 1000] * 100] * 100] * 100] %}{{ l|upper|length }}"),
    (
        "a list literal doubled",
        "{% set ns = namespace(l='x') %}{% for i in range(100) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l|lower|length }}",
    ),
    (
        "a map literal doubled",
        "{% set ns = namespace(l='x') %}{% for i in range(100) %}{% set ns.l = {'a': ns.l, 'b': ns.l} %}{% endfor %}{{ ns.l|lower|length }}",
    ),
    (
        "keyword arguments doubled",
        "{% set ns = namespace(l='x') %}{% for i in range(100) %}{% set ns.l = dict(a=ns.l, b=ns.l) %}{% endfor %}{{ ns.l|lower|length }}",
    ),
    ("a repeated list compared", "{% set l = ['x' * 100000] * 100000 %}{{ l|max|length }}"),
    // nesting as deep as the fuel allows: printed, compared, hashed and dropped
    (
        "a list nested twenty thousand deep",
        "{% set ns = namespace(l=[]) %}{% for i in range(20) %}{% for j in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}{% endfor %}{{ ns.l|lower|length }}{{ ns.l == ns.l }}{{ [ns.l]|unique|list|length }}{{ ns.l }}",
    ),
    (
        "a list nested until the fuel ends",
        "{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% for j in range(1000) %}{% set ns.l = [ns.l] %}{% endfor %}{% endfor %}",
    ),
];

#[test]
fn hostile_templates_stop_cleanly_within_a_second_in_bounded_memory() {
    let mut report = Vec::new();
    for (name, source) in HOSTILE {
        let (result, took, peak) = render(source);
        match &result {
            Err(e) => report.push(format!("{name}: {e} ({took:?}, {} MB)", peak >> 20)),
            Ok(text) => panic!("{name}: rendered {} bytes instead of stopping", text.len()),
        }
        assert!(took < Duration::from_secs(1), "{name}: took {took:?}");
        assert!(peak < MEMORY_BOUND, "{name}: {peak} bytes live at the peak (bound {MEMORY_BOUND})");
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn the_limits_are_named_and_settable() {
    // the output's size: found as it is written
    let limits = RenderLimits { fuel: 1_000_000, max_output_bytes: 1000 };
    let t = ChatTemplate::with_limits("{% for i in range(200) %}0123456789{% endfor %}", "", "", limits).unwrap();
    assert_eq!(t.limits(), limits);
    match t.apply(&[], false) {
        Err(ChatError::Limit { msg, .. }) => assert!(msg.contains("1000 bytes"), "{msg}"),
        other => panic!("{other:?}"),
    }
    // the same template fits a larger limit
    let limits = RenderLimits { fuel: 1_000_000, max_output_bytes: 2000 };
    let t = ChatTemplate::with_limits("{% for i in range(200) %}0123456789{% endfor %}", "", "", limits).unwrap();
    assert_eq!(t.apply(&[], false).unwrap().len(), 2000);
    // the work budget: the error names it and the line the render had reached
    let limits = RenderLimits { fuel: 5000, max_output_bytes: 1 << 20 };
    let t = ChatTemplate::with_limits("ok\n{% for i in range(100000) %}{% endfor %}", "", "", limits).unwrap();
    match t.apply(&[], false) {
        Err(e @ ChatError::Limit { .. }) => {
            assert_eq!(e.line(), 2, "{e}");
            assert!(e.to_string().contains("5000 fuel"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

/// A long conversation (200 messages of 2 KB) through every template of the fixtures
/// renders under the default limits, with room to spare: a tenth of the fuel still renders.
#[test]
fn real_templates_render_long_conversations_under_the_limits() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat");
    let messages: Vec<Message> = (0..200)
        .map(|i| Message::new(if i % 2 == 0 { "user" } else { "assistant" }, format!("message {i} ").repeat(200)))
        .collect();
    let tight = RenderLimits { fuel: RenderLimits::DEFAULT.fuel / 10, ..RenderLimits::DEFAULT };
    let mut rendered = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let fixture: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let Some(source) = fixture["template"].as_str() else { continue };
        let t = ChatTemplate::with_limits(source, "<s>", "</s>", tight).unwrap();
        match t.apply(&messages, true) {
            Ok(text) => {
                assert!(text.len() > 200 * 2000, "{}: {} bytes", path.display(), text.len());
                rendered += 1;
            }
            // templates that refuse this conversation (roles, a system message they need)
            // must refuse it for that reason, not for a limit
            Err(e) => assert!(!matches!(e, ChatError::Limit { .. }), "{}: {e}", path.display()),
        }
    }
    assert!(rendered >= 5, "only {rendered} templates rendered");
}
