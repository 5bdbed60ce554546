//! The shims that make minijinja print and convert values as Python jinja2 does:
//! `str()`/`repr()` of values, transformers' `tojson` (Python's `json.dumps`), and the
//! `str` methods whose Python meaning differs from minijinja-contrib's (whitespace is
//! `str.isspace()`, `title()` is `str.title()`).

use minijinja::value::{from_args, Kwargs, Rest, ValueKind, ValueOrKwargs};
use minijinja::{Error, ErrorKind, Output, State, Value};

/// `str.isspace()` for one character: Unicode White_Space (Rust's `is_whitespace`) plus the
/// four ASCII separators U+001C..U+001F, which Python counts as whitespace and Rust does not.
pub(crate) fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The marker of an error for text a shim would make longer than the render's limit, so
/// the chat template reports it as a limit (a list printed as text is as long as all its
/// items, and one item can be listed many times over at little cost).
#[derive(Debug)]
pub(crate) struct TooLong(pub(crate) usize);

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "text longer than the limit of {} bytes", self.0)
    }
}

impl std::error::Error for TooLong {}

/// How deep `str()` and `tojson` follow lists in lists, as Python's default recursion
/// limit lets them.
const MAX_DEPTH: usize = 1000;

/// Python's `RecursionError` past [`MAX_DEPTH`] levels of nesting.
fn check_depth(depth: usize) -> Result<(), Error> {
    if depth < MAX_DEPTH {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::InvalidOperation,
        format!("maximum recursion depth exceeded: a value nested more than {MAX_DEPTH} levels deep"),
    ))
}

/// The error for text longer than `limit` bytes.
fn too_long(limit: usize) -> Error {
    let marker = TooLong(limit);
    Error::new(ErrorKind::InvalidOperation, marker.to_string()).with_source(marker)
}

/// `Ok` while `out` holds at most `limit` bytes.
fn check_len(out: &str, limit: usize) -> Result<(), Error> {
    if out.len() <= limit {
        Ok(())
    } else {
        Err(too_long(limit))
    }
}

/// Python's `str(value)`, what `{{ value }}` prints: strings as they are, undefined as
/// nothing, everything else as its `repr()`; an error once longer than `limit` bytes.
pub(crate) fn py_str(value: &Value, limit: usize) -> Result<String, Error> {
    match value.kind() {
        ValueKind::String => Ok(value.as_str().unwrap_or_default().to_string()),
        ValueKind::Undefined => Ok(String::new()),
        _ => {
            let mut out = String::new();
            py_repr(value, &mut out, limit, 0)?;
            Ok(out)
        }
    }
}

/// Python's `repr(value)` for the values a template sees: `None`, `True`, ints, floats as
/// Python writes them, quoted strings, `[..]` lists, `(..)` tuples and `{..}` dicts.
/// Other objects (macros, namespaces, loop state) fall back to minijinja's own text.
/// Stops with an error once `out` is longer than `limit` bytes.
fn py_repr(value: &Value, out: &mut String, limit: usize, depth: usize) -> Result<(), Error> {
    check_depth(depth)?;
    match value.kind() {
        ValueKind::Undefined => out.push_str("Undefined"),
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number if !value.is_integer() => match f64::try_from(value.clone()) {
            Ok(f) => out.push_str(&py_float(f)),
            Err(_) => out.push_str(&format!("{value}")),
        },
        ValueKind::String => py_str_repr(value.as_str().unwrap_or_default(), out),
        // a lazy list (`[x] * n`, `a + b`, `map(..)`) prints as the list it stands for
        ValueKind::Seq | ValueKind::Iterable => {
            let tuple = value.is_tuple();
            out.push(if tuple { '(' } else { '[' });
            let mut n = 0;
            if let Ok(items) = value.try_iter() {
                for item in items {
                    if n > 0 {
                        out.push_str(", ");
                    }
                    py_repr(&item, out, limit, depth + 1)?;
                    n += 1;
                }
            }
            if tuple && n == 1 {
                out.push(',');
            }
            out.push(if tuple { ')' } else { ']' });
        }
        ValueKind::Map if !value.is_kwargs() => {
            out.push('{');
            if let Ok(keys) = value.try_iter() {
                for (i, key) in keys.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    py_repr(&key, out, limit, depth + 1)?;
                    out.push_str(": ");
                    py_repr(&value.get_item(&key).unwrap_or_default(), out, limit, depth + 1)?;
                }
            }
            out.push('}');
        }
        _ => push_display(value, out, limit)?,
    }
    check_len(out, limit)
}

/// Appends minijinja's own text of `value`, stopping with an error past `limit` bytes (an
/// object's text can be as long as everything it holds).
fn push_display(value: &Value, out: &mut String, limit: usize) -> Result<(), Error> {
    struct Bounded<'a>(&'a mut String, usize);
    impl std::fmt::Write for Bounded<'_> {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            if self.0.len() + s.len() > self.1 {
                return Err(std::fmt::Error);
            }
            self.0.push_str(s);
            Ok(())
        }
    }
    std::fmt::Write::write_fmt(&mut Bounded(out, limit), format_args!("{value}")).map_err(|_| too_long(limit))
}

/// Python's `repr(float)`: the shortest digits that round-trip (as Rust finds them), laid
/// out in fixed notation for decimal exponents -4..16 and as `1e+20` / `1.5e-07` outside.
pub(crate) fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f < 0.0 { "-inf".into() } else { "inf".into() };
    }
    // `{:e}` gives the shortest round-trip digits: "-1.2345e17", "1e-7", "0e0".
    let sci = format!("{:e}", f);
    // `{:e}` always writes an integer exponent; the fallbacks are never taken.
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::from(sign);
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push_str(&format!("e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs()));
    }
    out
}

/// Whether Python's `str.isprintable()` holds for `c`, which decides what `repr()` escapes.
/// Exact for ASCII and Latin-1; beyond that it knows the separators, the format characters
/// in common use and the private-use planes, but not every unassigned code point.
fn py_printable(c: char) -> bool {
    let u = c as u32;
    !(u < 0x20
        || (0x7f..=0xa0).contains(&u)
        || u == 0xad
        || u == 0x1680
        || (0x2000..=0x200f).contains(&u)
        || (0x2028..=0x202f).contains(&u)
        || (0x205f..=0x2064).contains(&u)
        || (0x2066..=0x206f).contains(&u)
        || u == 0x3000
        || (0xd800..=0xf8ff).contains(&u)
        || u == 0xfeff
        || (0xfff9..=0xfffb).contains(&u)
        || u == 0xfffe
        || u == 0xffff
        || (0x600..=0x605).contains(&u)
        || u == 0x61c
        || u == 0x6dd
        || u == 0x70f
        || u == 0x180e
        || (0xe0000..=0xe007f).contains(&u)
        || u >= 0xf0000)
}

/// Python's `repr(str)`: single quotes unless the text has a `'` and no `"`.
fn py_str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if py_printable(c) => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
}

/// The environment's formatter: `{{ value }}` prints Python's `str(value)` (at most
/// `limit` bytes of it).
pub(crate) fn formatter(out: &mut Output, _state: &mut State, value: &Value, limit: usize) -> Result<(), Error> {
    let written = match value.as_str() {
        Some(s) => out.write_str(s),
        None => out.write_str(&py_str(value, limit)?),
    };
    written.map_err(|_| Error::new(ErrorKind::WriteFailure, "cannot write the rendered text"))
}

/// The `string` filter: Python's `str(value)` (minijinja's writes lists and dicts its way),
/// at most `limit` bytes.
pub(crate) fn string_filter(value: &Value, limit: usize) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::String => Ok(value.clone()),
        _ => Ok(Value::from(py_str(value, limit)?)),
    }
}

/// The `sequence` test as jinja2 has it (anything with a length and items): strings, lists,
/// tuples, dicts, ranges, and the undefined value; not a one-shot iterator (a `map` result).
pub(crate) fn is_sequence(value: &Value) -> bool {
    match value.kind() {
        ValueKind::String | ValueKind::Bytes | ValueKind::Seq | ValueKind::Undefined => true,
        ValueKind::Map => !value.is_kwargs(),
        ValueKind::Iterable => value.len().is_some(),
        _ => false,
    }
}

/// The `trim` filter as jinja2 has it: `str(value).strip(chars)`, with Python's whitespace
/// (`str(value)` at most `limit` bytes).
pub(crate) fn trim_filter(value: &Value, chars: Option<Value>, limit: usize) -> Result<Value, Error> {
    let s = py_str(value, limit)?;
    Ok(Value::from(py_strip(&s, chars.as_ref(), true, true)?))
}

/// `str.strip`/`lstrip`/`rstrip`: `chars` None (or absent) strips `str.isspace()` characters.
fn py_strip<'a>(s: &'a str, chars: Option<&Value>, left: bool, right: bool) -> Result<&'a str, Error> {
    let set: Option<Vec<char>> = match chars {
        None => None,
        Some(v) if v.is_none() || v.is_undefined() => None,
        Some(v) => match v.as_str() {
            Some(c) => Some(c.chars().collect()),
            None => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("strip arg must be None or str, not {}", v.kind()),
                ))
            }
        },
    };
    let strip = |c: char| match &set {
        None => is_py_space(c),
        Some(set) => set.contains(&c),
    };
    let mut out = s;
    if left {
        out = out.trim_start_matches(strip);
    }
    if right {
        out = out.trim_end_matches(strip);
    }
    Ok(out)
}

/// `str.split(None, maxsplit)`: runs of `str.isspace()` characters separate, ends ignored.
fn py_split_whitespace(s: &str, maxsplit: i64) -> Vec<Value> {
    let mut parts = Vec::new();
    let mut rest = s.trim_start_matches(is_py_space);
    while !rest.is_empty() {
        if maxsplit >= 0 && parts.len() as i64 == maxsplit {
            parts.push(Value::from(rest));
            break;
        }
        let end = rest.find(is_py_space).unwrap_or(rest.len());
        parts.push(Value::from(&rest[..end]));
        rest = rest[end..].trim_start_matches(is_py_space);
    }
    parts
}

/// `str.splitlines(keepends)`: Python's line boundaries (`\n`, `\r\n`, `\r`, `\v`, `\f`,
/// U+001C..U+001E, U+0085, U+2028, U+2029); a trailing boundary makes no empty last line.
fn py_splitlines(s: &str, keepends: bool) -> Vec<Value> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let is_break = matches!(
            c,
            '\n' | '\r' | '\u{b}' | '\u{c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
        );
        if !is_break {
            continue;
        }
        let mut end = i + c.len_utf8();
        if c == '\r' {
            if let Some(&(j, '\n')) = chars.peek() {
                chars.next();
                end = j + 1;
            }
        }
        lines.push(Value::from(if keepends { &s[start..end] } else { &s[start..i] }));
        start = end;
    }
    if start < s.len() {
        lines.push(Value::from(&s[start..]));
    }
    lines
}

/// `str.title()`: a cased character after an uncased one is upper-cased, the rest lowered
/// (`"they're"` becomes `"They'Re"`, unlike jinja2's `title` filter).
fn py_title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut previous_cased = false;
    for c in s.chars() {
        if previous_cased {
            out.extend(c.to_lowercase());
        } else {
            out.extend(c.to_uppercase());
        }
        previous_cased = c.is_uppercase() || c.is_lowercase();
    }
    out
}

/// `Err` when a `str.format` field of `format` asks for a width or precision above `limit`:
/// minijinja-contrib pads to it without asking the fuel first.
fn check_format_widths(format: &str, limit: usize) -> Result<(), Error> {
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '{' || chars.next_if_eq(&'{').is_some() {
            continue;
        }
        // a replacement field: the numbers of its spec, after the first ':'
        let mut in_spec = false;
        let mut number: usize = 0;
        for c in chars.by_ref() {
            match c {
                '}' => break,
                ':' if !in_spec => in_spec = true,
                '0'..='9' if in_spec => {
                    number = number.saturating_mul(10).saturating_add(c as usize - '0' as usize);
                    if number > limit {
                        return Err(too_long(limit));
                    }
                }
                _ => number = 0,
            }
        }
    }
    Ok(())
}

/// `sep.join(items)` as minijinja-contrib has it (items printed as `{{ }}` would), paying
/// fuel for the text as it grows and stopping at `limit` bytes: its own version checks
/// neither when the separator is empty.
fn py_join(state: &State, sep: &str, args: &[Value], limit: usize) -> Result<Value, Error> {
    let (items,): (&Value,) = from_args(args)?;
    let mut out = String::new();
    for (i, item) in items.try_iter()?.enumerate() {
        let before = out.len();
        if i > 0 {
            out.push_str(sep);
        }
        match item.as_str() {
            Some(text) => out.push_str(text),
            None => push_display(&item, &mut out, limit)?,
        }
        check_len(&out, limit)?;
        state.consume_fuel((out.len() - before) as u64 / 64 + 1)?;
    }
    Ok(Value::from(out))
}

/// The `format` filter (printf style, `"%s"|format(x)`): minijinja's, after every argument
/// that is not a string, number or boolean became Python's `str()` of it, as `%s` prints it
/// in jinja2, and the strings were found to add up to at most `limit` bytes (minijinja's
/// own bounds only the widths and precisions).
pub(crate) fn format_filter(
    state: &mut State,
    format: &Value,
    args: Rest<ValueOrKwargs>,
    limit: usize,
) -> Result<Value, Error> {
    let mut total = format.as_str().map_or(0, str::len);
    let mut converted = Vec::with_capacity(args.len());
    for arg in args.0 {
        let value = arg.into_value();
        let value = match value.kind() {
            ValueKind::String | ValueKind::Number | ValueKind::Bool | ValueKind::None | ValueKind::Undefined => value,
            _ if value.is_kwargs() => value,
            _ => Value::from(py_str(&value, limit.saturating_sub(total))?),
        };
        total = total.saturating_add(value.as_str().map_or(0, str::len));
        if total > limit {
            return Err(too_long(limit));
        }
        converted.push(ValueOrKwargs::from(value));
    }
    minijinja::filters::format(state, format, Rest(converted))
}

/// The unknown-method callback: Python `str` methods whose meaning differs from
/// minijinja-contrib's here, then everything else minijinja-contrib's pycompat implements
/// (`str.format` only with widths up to `limit`).
pub(crate) fn unknown_method(
    state: &mut State,
    value: &Value,
    method: &str,
    args: &[Value],
    limit: usize,
) -> Result<Value, Error> {
    if let Some(s) = value.as_str() {
        match method {
            "format" => check_format_widths(s, limit)?,
            "join" => return py_join(state, s, args, limit),
            "strip" | "lstrip" | "rstrip" => {
                let (chars,): (Option<Value>,) = from_args(args)?;
                let (left, right) = (method != "rstrip", method != "lstrip");
                return Ok(Value::from(py_strip(s, chars.as_ref(), left, right)?));
            }
            "split" => {
                let (sep, maxsplit): (Option<Value>, Option<i64>) = from_args(args)?;
                if sep.as_ref().is_none_or(|v| v.is_none()) {
                    return Ok(Value::from(py_split_whitespace(s, maxsplit.unwrap_or(-1))));
                }
            }
            "splitlines" => {
                let (keepends,): (Option<bool>,) = from_args(args)?;
                return Ok(Value::from(py_splitlines(s, keepends.unwrap_or(false))));
            }
            "title" => {
                let () = from_args(args)?;
                return Ok(Value::from(py_title(s)));
            }
            "isspace" => {
                let () = from_args(args)?;
                return Ok(Value::from(!s.is_empty() && s.chars().all(is_py_space)));
            }
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// transformers' `tojson` filter, `json.dumps(x, ensure_ascii=False, indent=None,
/// separators=None, sort_keys=False)`, arguments by position or by name. Unlike jinja2's own
/// (and minijinja's) it neither escapes HTML characters nor sorts keys, and it writes
/// `", "` and `": "` between items as Python does. An error once the text would be longer
/// than `limit` bytes.
pub(crate) fn tojson(value: &Value, positional: Rest<Value>, kwargs: Kwargs, limit: usize) -> Result<String, Error> {
    if positional.len() > 4 {
        return Err(Error::new(ErrorKind::TooManyArguments, "tojson takes at most 4 arguments"));
    }
    let arg = |i: usize, name: &str| -> Result<Option<Value>, Error> {
        let named: Option<Value> = kwargs.get(name)?;
        Ok(named.or_else(|| positional.get(i).cloned()).filter(|v| !v.is_none()))
    };
    let ensure_ascii = arg(0, "ensure_ascii")?.is_some_and(|v| v.is_true());
    let indent = match arg(1, "indent")? {
        None => None,
        Some(v) if v.is_integer() => {
            let n = usize::try_from(i64::try_from(v)?.max(0)).unwrap_or(usize::MAX);
            if n > limit {
                return Err(too_long(limit));
            }
            Some(" ".repeat(n))
        }
        Some(ref v) if let Some(s) = v.as_str() => Some(s.to_string()),
        Some(v) => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: indent must be int or str, not {}", v.kind()),
            ))
        }
    };
    let (item_sep, key_sep) = match arg(2, "separators")? {
        Some(v) => {
            let (item, key): (String, String) = from_args(&v.try_iter()?.collect::<Vec<_>>())?;
            (item, key)
        }
        None if indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    let sort_keys = arg(3, "sort_keys")?.is_some_and(|v| v.is_true());
    kwargs.assert_all_used()?;
    let opts = JsonOpts { ensure_ascii, indent, item_sep, key_sep, sort_keys, limit };
    let mut out = String::new();
    json_value(value, &opts, 0, &mut out)?;
    Ok(out)
}

struct JsonOpts {
    ensure_ascii: bool,
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
    /// The most bytes the text may have.
    limit: usize,
}

impl JsonOpts {
    /// What goes between items (and inside the brackets) at nesting `depth`.
    fn newline(&self, depth: usize, out: &mut String) {
        if let Some(indent) = &self.indent {
            out.push('\n');
            for _ in 0..depth {
                out.push_str(indent);
            }
        }
    }
}

fn not_serializable(value: &Value) -> Error {
    let type_name = match value.kind() {
        ValueKind::Undefined => "Undefined".to_string(),
        kind => kind.to_string(),
    };
    Error::new(ErrorKind::InvalidOperation, format!("Object of type {type_name} is not JSON serializable"))
}

fn json_value(value: &Value, opts: &JsonOpts, depth: usize, out: &mut String) -> Result<(), Error> {
    check_depth(depth)?;
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number if value.is_integer() => out.push_str(&format!("{value}")),
        ValueKind::Number => {
            let f = f64::try_from(value.clone())?;
            out.push_str(&match f {
                f if f.is_nan() => "NaN".to_string(),
                f if f.is_infinite() => if f < 0.0 { "-Infinity" } else { "Infinity" }.to_string(),
                f => py_float(f),
            });
        }
        ValueKind::String => json_string(value.as_str().unwrap_or_default(), opts.ensure_ascii, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            json_container(&items, '[', ']', opts, depth, out, |item, out| json_value(item, opts, depth + 1, out))?;
        }
        ValueKind::Map if !value.is_kwargs() => {
            let mut keys: Vec<Value> = value.try_iter()?.collect();
            if opts.sort_keys {
                keys.sort();
            }
            json_container(&keys, '{', '}', opts, depth, out, |key, out| {
                match key.kind() {
                    ValueKind::String => json_string(key.as_str().unwrap_or_default(), opts.ensure_ascii, out),
                    ValueKind::None | ValueKind::Bool | ValueKind::Number => {
                        let mut text = String::new();
                        json_value(key, opts, depth + 1, &mut text)?;
                        json_string(&text, opts.ensure_ascii, out);
                    }
                    _ => {
                        return Err(Error::new(
                            ErrorKind::InvalidOperation,
                            format!("keys must be str, int, float, bool or None, not {}", key.kind()),
                        ))
                    }
                }
                out.push_str(&opts.key_sep);
                json_value(&value.get_item(key)?, opts, depth + 1, out)
            })?;
        }
        _ => return Err(not_serializable(value)),
    }
    Ok(())
}

fn json_container(
    items: &[Value],
    open: char,
    close: char,
    opts: &JsonOpts,
    depth: usize,
    out: &mut String,
    mut item: impl FnMut(&Value, &mut String) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    if !items.is_empty() {
        for (i, v) in items.iter().enumerate() {
            if i > 0 {
                out.push_str(&opts.item_sep);
            }
            opts.newline(depth + 1, out);
            item(v, out)?;
            check_len(out, opts.limit)?;
        }
        opts.newline(depth, out);
    }
    out.push(close);
    Ok(())
}

/// A JSON string as Python's `json` module writes it.
fn json_string(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_as_python_writes_them() {
        for (f, py) in [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (-2.25, "-2.25"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            assert_eq!(py_float(f), py, "{f:e}");
        }
    }

    #[test]
    fn str_repr_quotes_and_escapes() {
        let repr = |s: &str| {
            let mut out = String::new();
            py_str_repr(s, &mut out);
            out
        };
        assert_eq!(repr("a"), "'a'");
        assert_eq!(repr("it's"), "\"it's\"");
        assert_eq!(repr("'\""), "'\\'\"'");
        assert_eq!(repr("a\nb\t\\"), "'a\\nb\\t\\\\'");
        assert_eq!(repr("\u{1}\u{7f}\u{a0}é\u{200b}世\u{1f389}"), "'\\x01\\x7f\\xa0é\\u200b世\u{1f389}'");
    }

    #[test]
    fn splitlines_and_split_as_python() {
        let strs = |v: Vec<Value>| v.iter().map(|v| v.as_str().unwrap().to_string()).collect::<Vec<_>>();
        assert_eq!(strs(py_splitlines("a\r\nb\rc\n\nd\u{2028}e\n", false)), ["a", "b", "c", "", "d", "e"]);
        assert_eq!(strs(py_splitlines("a\r\nb\n", true)), ["a\r\n", "b\n"]);
        assert_eq!(strs(py_split_whitespace(" a  b \u{1f} c ", -1)), ["a", "b", "c"]);
        assert_eq!(strs(py_split_whitespace(" a  b  c ", 1)), ["a", "b  c "]);
        assert_eq!(py_title("they're bill's 3rd"), "They'Re Bill'S 3Rd");
    }

    #[test]
    fn format_widths_are_bounded() {
        assert!(check_format_widths("{:>100}{0:.5f}{{:1000000}}", 1000).is_ok());
        assert!(check_format_widths("{0:>1001}", 1000).is_err());
        assert!(check_format_widths("{:.99999999999999999999999999}", 1000).is_err());
        assert!(check_format_widths("{:0>1000}", 1000).is_ok(), "the fill and the width apart");
    }
}
