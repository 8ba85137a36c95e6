//! Word lists: what names an operation identity, a one-time token, a resource id.
//! These are the last resort after types, `.await` and SQL text.

fn words(name: &str) -> impl Iterator<Item = String> + '_ {
    // snake_case, camelCase and `a.b` paths split into lowercase words.
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
        } else if c.is_uppercase() && prev_lower {
            out.push(std::mem::take(&mut cur));
            cur.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else {
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.push(c.to_ascii_lowercase());
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out.into_iter()
}

const OP_WORDS: &[&str] = &[
    "reservation",
    "attempt",
    "generation",
    "gen",
    "version",
    "lease",
    "token",
    "fencing",
    "fence",
    "operation",
    "op",
    "epoch",
    "nonce",
    "round",
    "term",
    "hold",
    "ticket",
    "seq",
    "sequence",
    "revision",
    "rev",
    "etag",
    "owner",
    "booking",
    "claim",
    "incarnation",
    "execution",
    "correlation",
    "session",
    "rental",
    "trial",
    "grant",
    "period",
    "cycle",
    "assignment",
    "checkout",
    "instance",
    "shift",
    "step",
    "cas",
];

/// Names an operation identity: reservation / attempt / generation / version / lease / token /
/// operation id (the last segment of a dotted path is what counts).
pub fn is_operation_identity(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let w: Vec<String> = words(last).collect();
    // `job_id`, `task_id`, `run_id`, `request_id`: the id of the operation itself.
    let op_id = w.len() >= 2
        && w.last().is_some_and(|x| x == "id")
        && matches!(
            w[w.len() - 2].as_str(),
            "job" | "task" | "run" | "request" | "workflow" | "saga"
        );
    op_id || w.iter().any(|x| OP_WORDS.contains(&x.as_str()))
}

/// Names a resource id: `seat_id`, `orderId`, `id`, `sku`, `key`.
pub fn is_resource_id(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let w: Vec<String> = words(last).collect();
    w.last().is_some_and(|x| {
        x == "id" || x == "ids" || x == "uuid" || x == "key" || x == "sku" || x == "no"
    })
}

const TOKEN_WORDS: &[&str] = &[
    "token",
    "idem",
    "idempotency",
    "idempotent",
    "nonce",
    "dedup",
    "dedupe",
    "replay",
    "once",
    "otp",
    "csrf",
    "captcha",
    "onetime",
    "submit",
    "submission",
    "voucher",
    "coupon",
    "magic",
    "invite",
    "redeem",
    "redemption",
    "ticket",
    "reset",
    "verification",
    "activation",
];

/// Names a one-time token or idempotency key (`idem:{}`, `payment_token`, `idempotency_keys`).
pub fn is_token_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower.contains("idempot")
        || lower.contains("request_id")
        || lower.contains("requestid")
        || lower.contains("request-id")
    {
        return true;
    }
    words(name).any(|w| {
        let w = w.trim_end_matches('s');
        TOKEN_WORDS.contains(&w) || w.starts_with("idem") || w.starts_with("dedup")
    })
}

/// Remote-looking receiver or type names, the last resort for calls with no other evidence.
pub fn is_remote_name(name: &str) -> bool {
    words(name).any(|w| {
        matches!(
            w.as_str(),
            "gateway"
                | "client"
                | "http"
                | "api"
                | "grpc"
                | "stub"
                | "psp"
                | "remote"
                | "webhook"
                | "upstream"
                | "mailer"
                | "sms"
                | "notifier"
                | "stripe"
                | "paypal"
                | "adyen"
                | "twilio"
                | "sendgrid"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_words() {
        assert!(is_operation_identity("reservation_id"));
        assert!(is_operation_identity("job.attemptId"));
        assert!(is_operation_identity("generation"));
        assert!(!is_operation_identity("seat_id"));
        assert!(!is_operation_identity("order_id"));
    }

    #[test]
    fn token_words() {
        assert!(is_token_name("idem:{}"));
        assert!(is_token_name("idempotency_keys"));
        assert!(is_token_name("payment_token"));
        assert!(is_token_name("oneTimeTokens"));
        assert!(!is_token_name("order:{}"));
        assert!(!is_token_name("stock"));
    }

    #[test]
    fn resource_ids() {
        assert!(is_resource_id("seat_id"));
        assert!(is_resource_id("job.order_id"));
        assert!(!is_resource_id("amount"));
    }
}
