//! A small JSON Schema validator for the subset `docs/json-schema.json` uses, so the JSON
//! output is checked against the documented schema. Unsupported keywords fail loudly.

use serde_json::Value;

/// Validates `value` against `schema`; returns every violation as `path: problem`.
pub fn validate(schema: &Value, value: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(schema, schema, value, "$", &mut errors);
    errors
}

fn check(root: &Value, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        panic!("schema at {at} is not an object");
    };
    for (keyword, arg) in obj {
        match keyword.as_str() {
            "$schema" | "$id" | "title" | "description" | "$defs" => {}
            "$ref" => {
                let name = arg
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .unwrap_or_else(|| panic!("unsupported $ref {arg}"));
                check(root, &root["$defs"][name], value, at, errors);
            }
            "type" => {
                let types: Vec<&str> = match arg {
                    Value::String(s) => vec![s.as_str()],
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("bad type keyword at {at}"),
                };
                if !types.iter().any(|t| has_type(value, t)) {
                    errors.push(format!("{at}: expected {types:?}, found {value}"));
                }
            }
            "const" => {
                if value != arg {
                    errors.push(format!("{at}: expected {arg}, found {value}"));
                }
            }
            "enum" => {
                if !arg.as_array().is_some_and(|a| a.contains(value)) {
                    errors.push(format!("{at}: {value} is not one of {arg}"));
                }
            }
            "required" => {
                if let Some(o) = value.as_object() {
                    for key in arg.as_array().expect("required is an array") {
                        let key = key.as_str().expect("required names are strings");
                        if !o.contains_key(key) {
                            errors.push(format!("{at}: missing `{key}`"));
                        }
                    }
                }
            }
            "properties" => {
                if let Some(o) = value.as_object() {
                    for (key, sub) in arg.as_object().expect("properties is an object") {
                        if let Some(v) = o.get(key) {
                            check(root, sub, v, &format!("{at}.{key}"), errors);
                        }
                    }
                }
            }
            "additionalProperties" => {
                assert_eq!(
                    arg,
                    &Value::Bool(false),
                    "only `additionalProperties: false` is supported"
                );
                if let Some(o) = value.as_object() {
                    let known = obj.get("properties").and_then(Value::as_object);
                    for key in o.keys() {
                        if !known.is_some_and(|k| k.contains_key(key)) {
                            errors.push(format!("{at}: unexpected `{key}`"));
                        }
                    }
                }
            }
            "items" => {
                if let Some(a) = value.as_array() {
                    for (i, v) in a.iter().enumerate() {
                        check(root, arg, v, &format!("{at}[{i}]"), errors);
                    }
                }
            }
            "minItems" | "maxItems" => {
                if let Some(a) = value.as_array() {
                    let n = arg.as_u64().expect("a count") as usize;
                    if (keyword == "minItems" && a.len() < n)
                        || (keyword == "maxItems" && a.len() > n)
                    {
                        errors.push(format!("{at}: {keyword} {n} violated by {} items", a.len()));
                    }
                }
            }
            "minLength" | "maxLength" => {
                if let Some(s) = value.as_str() {
                    let n = arg.as_u64().expect("a length") as usize;
                    let len = s.chars().count();
                    if (keyword == "minLength" && len < n) || (keyword == "maxLength" && len > n) {
                        errors.push(format!("{at}: {keyword} {n} violated by {s:?}"));
                    }
                }
            }
            "minimum" => {
                if let Some(n) = value.as_f64()
                    && n < arg.as_f64().expect("a number")
                {
                    errors.push(format!("{at}: {n} is below {arg}"));
                }
            }
            other => panic!("schema keyword `{other}` at {at} is not supported by this validator"),
        }
    }
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_u64() || value.is_i64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        other => panic!("unknown type `{other}`"),
    }
}

/// The documented schema.
pub fn documented() -> Value {
    let text = std::fs::read_to_string(crate::support::repo_root().join("docs/json-schema.json"))
        .expect("docs/json-schema.json exists");
    serde_json::from_str(&text).expect("the schema is JSON")
}

#[test]
fn validator_rejects_what_the_schema_forbids() {
    let schema = documented();
    let bad = serde_json::json!({
        "version": 2,
        "tool": { "name": "staleguard" },
        "root": "/",
        "findings": [{ "rule": "x", "level": "fatal" }],
        "errors": [],
        "summary": { "files": -1, "errors": 0, "warnings": 0, "notes": 0, "skipped": 0, "baselined": 0, "unreached": 0, "outside_diff": 0 },
        "extra": true
    });
    let errors = validate(&schema, &bad);
    for expected in [
        "$.version",
        "$.tool: missing `version`",
        "$.findings[0].level",
        "$.findings[0]: missing `message`",
        "$.summary.files",
        "unexpected `extra`",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "no error about {expected}: {errors:#?}"
        );
    }
}
