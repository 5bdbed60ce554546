//! Chat templates rendered by `rgml_models::chat` against Python jinja2's rendering of the
//! same templates, as transformers' `apply_chat_template` does it.
//!
//! The expected texts and errors are in tests/fixtures/chat/*.json, written by
//! scripts/fixtures/make_chat_fixtures.py (see the README there); these tests need neither
//! Python nor the GGUF files the templates came from.

use std::path::{Path, PathBuf};

use rgml_models::chat::{ChatError, ChatTemplate, Message};
use serde_json::Value as Json;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/chat")
}

fn load(name: &str) -> Json {
    let path = fixture_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn all_fixtures() -> Vec<(String, Json)> {
    let mut names: Vec<String> = std::fs::read_dir(fixture_dir())
        .expect("tests/fixtures/chat exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names.into_iter().map(|n| (n.clone(), load(&n))).collect()
}

fn str_field<'a>(v: &'a Json, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("fixture field {key:?} is not a string: {v}"))
}

fn messages(case: &Json) -> Vec<Message> {
    case["messages"]
        .as_array()
        .expect("messages is a list")
        .iter()
        .map(|m| Message::new(str_field(m, "role"), str_field(m, "content")))
        .collect()
}

/// Renders one fixture case; `Err` describes how it differs from jinja2.
fn check_case(fixture: &Json, case: &Json) -> Result<(), String> {
    let source = case.get("template").or(fixture.get("template")).and_then(Json::as_str).expect("a template source");
    let bos = str_field(fixture, "bos_token");
    let eos = str_field(fixture, "eos_token");
    let agp = case["add_generation_prompt"].as_bool().expect("add_generation_prompt is a bool");
    let got = ChatTemplate::new(source, bos, eos).and_then(|t| t.apply(&messages(case), agp));

    if let Some(known) = case.get("known_difference") {
        // minijinja cannot match jinja2 here: hold it to what it does today (a text, or an
        // error's kind and line), so that a change on either side is noticed.
        let want = &known["minijinja"];
        return match (&got, want.as_str()) {
            (Ok(text), Some(want)) if text == want => Ok(()),
            (Err(e), None)
                if error_matches(e, str_field(want, "kind"), None)
                    && Some(e.line() as u64) == want["line"].as_u64() =>
            {
                Ok(())
            }
            _ => Err(format!("known difference changed: want minijinja's {want}, got {got:?}")),
        };
    }
    if let Some(want) = case.get("expected") {
        let want = want.as_str().expect("expected is a string");
        return match got {
            Ok(text) if text == want => Ok(()),
            Ok(text) => Err(format!("text differs\n  jinja2:    {want:?}\n  minijinja: {text:?}")),
            Err(e) => Err(format!("jinja2 renders {want:?}, minijinja fails: {e}")),
        };
    }
    let want = &case["error"];
    let (kind, line) = (str_field(want, "kind"), want["line"].as_u64().map(|l| l as usize));
    let err = match got {
        Ok(text) => return Err(format!("jinja2 raises {want}, minijinja renders {text:?}")),
        Err(e) => e,
    };
    if !error_matches(&err, kind, want["message"].as_str()) {
        return Err(format!("jinja2 raises {want}, minijinja's error is {err:?}"));
    }
    if line.is_some_and(|l| l != err.line()) {
        return Err(format!(
            "jinja2 raises {want} on line {line:?}, minijinja's error is on line {}: {err}",
            err.line()
        ));
    }
    Ok(())
}

/// Whether `err` is the ChatError for a fixture's error `kind`; for `raise_exception` the
/// message must match too (the template's own text is the one error text both engines share).
fn error_matches(err: &ChatError, kind: &str, message: Option<&str>) -> bool {
    match (kind, err) {
        ("syntax", ChatError::Syntax { .. }) => true,
        ("raise_exception", ChatError::Raised { msg, .. }) => message.is_none_or(|m| m == msg),
        ("undefined", ChatError::Undefined { .. }) => true,
        ("runtime", ChatError::Render { .. }) => true,
        _ => false,
    }
}

#[test]
fn every_fixture_case_renders_as_jinja2() {
    let mut failures = Vec::new();
    let mut count = 0;
    for (name, fixture) in all_fixtures() {
        for case in fixture["cases"].as_array().expect("cases is a list") {
            count += 1;
            if let Err(why) = check_case(&fixture, case) {
                failures.push(format!("{name} / {}: {why}", str_field(case, "name")));
            }
        }
    }
    assert!(count >= 250, "only {count} fixture cases found");
    assert!(failures.is_empty(), "{} of {count} cases differ from jinja2:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn fixtures_cover_the_templates() {
    let names: Vec<String> = all_fixtures().into_iter().map(|(n, _)| n).collect();
    for want in
        ["smollm2", "gemma3", "chatml", "qwen2", "phi-3", "command-r", "command-r-tool_use", "command-r-rag", "gemma-4"]
    {
        assert!(names.iter().any(|n| n == want), "no fixture {want}.json in {names:?}");
    }
}

#[test]
fn builtins_are_the_fixture_sources() {
    for name in ["gemma3", "chatml"] {
        let fixture = load(name);
        assert_eq!(ChatTemplate::builtin(name), Some(str_field(&fixture, "template")), "builtin {name}");
    }
    assert_eq!(ChatTemplate::builtin("llama2"), None);
    assert_eq!(ChatTemplate::builtin(""), None);
}

#[test]
fn source_is_kept() {
    let t = ChatTemplate::new("{{ bos_token }}x", "<s>", "</s>").unwrap();
    assert_eq!(t.source(), "{{ bos_token }}x");
    assert_eq!(t.apply(&[], false).unwrap(), "<s>x");
}

#[test]
fn empty_messages_render_as_jinja2_for_smollm2() {
    let fixture = load("smollm2");
    let t = ChatTemplate::new(str_field(&fixture, "template"), "<|im_start|>", "<|im_end|>").unwrap();
    // jinja2: the for loop renders nothing, the generation prompt still comes.
    assert_eq!(t.apply(&[], false).unwrap(), "");
    assert_eq!(t.apply(&[], true).unwrap(), "<|im_start|>assistant\n");
    for agp in [true, false] {
        let case = fixture["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == format!("empty_messages/{}", if agp { "gen" } else { "nogen" }).as_str())
            .expect("an empty_messages case");
        assert_eq!(t.apply(&[], agp).unwrap(), str_field(case, "expected"));
    }
}

#[test]
fn syntax_error_names_the_line() {
    for (source, line) in [
        ("{{ 1 + }}", 1),
        ("a\nb\n{{ 1 + }}\nc", 3),
        ("{% for m in messages %}\n{{ m.role }}\n\n\n{% endif %}", 5),
        ("line 1\nline 2\n{% if %}", 3),
        ("\n\n\n\n\n\n{% frobnicate %}", 7),
    ] {
        match ChatTemplate::new(source, "", "") {
            Err(ChatError::Syntax { line: got, msg }) => {
                assert_eq!(got, line, "{source:?}: {msg}");
                assert!(!msg.is_empty());
            }
            other => panic!("{source:?}: want a syntax error on line {line}, got {other:?}"),
        }
    }
    let err = ChatTemplate::new("ok\n{% if true %}", "", "").unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

#[test]
fn raise_exception_reports_its_line_and_message() {
    let user = [Message::new("user", "hi")];
    for n in 1..=12 {
        let source = format!("{}{{{{ raise_exception('stop at ' ~ {n}) }}}}\nafter", "text\n".repeat(n - 1));
        let err = ChatTemplate::new(&source, "", "").unwrap().apply(&user, false).unwrap_err();
        assert_eq!(err, ChatError::Raised { line: n, msg: format!("stop at {n}") }, "{source:?}");
    }
    // Inside an if block inside a loop, as Gemma's role check is: source line 19, as the
    // '\n\n' literals on lines 4 and 6 hold real newlines (jinja2 says 19 too).
    let gemma = ChatTemplate::new(ChatTemplate::builtin("gemma3").unwrap(), "<bos>", "<eos>").unwrap();
    let err = gemma.apply(&[Message::new("assistant", "a"), Message::new("user", "u")], true).unwrap_err();
    let msg = "Conversation roles must alternate user/assistant/user/assistant/...";
    assert_eq!(err, ChatError::Raised { line: 19, msg: msg.into() });
    assert_eq!(err.to_string(), format!("chat template raised an exception on line 19: {msg}"));
}

#[test]
fn render_errors_name_the_line() {
    let user = [Message::new("user", "hi")];
    let render = |source: &str| ChatTemplate::new(source, "", "").unwrap().apply(&user, true).unwrap_err();
    match render("a\nb\n{{ no_such_function() }}") {
        ChatError::Undefined { line: 3, .. } => {}
        other => panic!("undefined function: {other:?}"),
    }
    match render("a\n{{ messages[0].content + 1 }}") {
        ChatError::Render { line: 2, .. } => {}
        other => panic!("type error: {other:?}"),
    }
    match render("\n\n\n{{ nothing.attr }}") {
        ChatError::Undefined { line: 4, .. } => {}
        other => panic!("attribute of undefined: {other:?}"),
    }
    match render("{{ messages[0].content.frobnicate() }}") {
        ChatError::Undefined { line: 1, .. } => {}
        other => panic!("unknown method: {other:?}"),
    }
}

#[test]
fn strftime_now_is_the_local_time() {
    let t = ChatTemplate::new("{{ strftime_now('%Y-%m-%d') }}|{{ strftime_now('%d %b %Y') }}", "", "").unwrap();
    let before = chrono::Local::now();
    let got = t.apply(&[], false).unwrap();
    let after = chrono::Local::now();
    let at = |d: chrono::DateTime<chrono::Local>| format!("{}|{}", d.format("%Y-%m-%d"), d.format("%d %b %Y"));
    assert!(got == at(before) || got == at(after), "{got:?}");
    let bad = ChatTemplate::new("\n{{ strftime_now(3) }}", "", "").unwrap().apply(&[], false).unwrap_err();
    assert!(matches!(bad, ChatError::Render { line: 2, .. }), "{bad:?}");
}

#[test]
fn message_constructor_and_templates_are_shareable() {
    let m = Message::new("user", String::from("x"));
    assert_eq!(m, Message { role: "user".into(), content: "x".into() });
    fn send_sync<T: Send + Sync>() {}
    send_sync::<ChatTemplate>();
    send_sync::<ChatError>();
}
