//! Word lists: what names an operation identity, a one-time token, a resource id.
//! These are the last resort after types, `.await` and SQL text.

pub(crate) fn words(name: &str) -> impl Iterator<Item = String> + '_ {
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

/// Is `column` the row's own key in `table`: `job_id` in `video_jobs`, `task_id` in `task`
/// (the id named after the table's last word)? An operation identity is a different
/// lifecycle's id (`attempt_id` on `payments`), not the key of the row itself.
pub fn is_own_key(column: &str, table: Option<&str>) -> bool {
    let Some(table) = table else {
        return false;
    };
    let w: Vec<String> = words(column).collect();
    let [.., noun, id] = w.as_slice() else {
        return false;
    };
    let last = table
        .rsplit(['.', '_'])
        .next()
        .unwrap_or(table)
        .to_ascii_lowercase();
    let last = last.strip_suffix('s').unwrap_or(&last);
    id == "id" && noun == last
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
    "invitation",
    "challenge",
    "redeem",
    "redemption",
    "ticket",
    "reset",
    "recovery",
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
        || lower.contains("one_time")
        || lower.contains("onetime")
    {
        return true;
    }
    // A WebAuthn ceremony's state (`Cache::Webauthn`, `WebauthnServiceReq`): one challenge,
    // answered once; not an identifier kept for the user (`webauthn_user_id`).
    if words(name).any(|w| w == "webauthn") && !words(name).any(|w| w == "id") {
        return true;
    }
    // A token in the sense of an asset or a piece of text (`erc20_token_transfers`,
    // `token_outputs`, `cashu_escrow_token`, `token_deltas`): moved, held or indexed, never
    // redeemed once. Only when `token` is the one word that named it.
    let asset = words(name).any(|w| ASSET_TOKEN_WORDS.contains(&w.trim_end_matches('s')));
    let mut prev = String::new();
    words(name).any(|w| {
        if asset && w.trim_end_matches('s') == "token" {
            prev = w;
            return false;
        }
        // Plurals: `tickets`, `account_recoveries`.
        let singular = match w.strip_suffix("ies") {
            Some(stem) => format!("{stem}y"),
            None => w.trim_end_matches('s').to_string(),
        };
        let w = singular.as_str();
        // A code that is a one-time credential by what it is for (`auth_code`,
        // `DeviceCode`, `email_verification_codes`); `code` alone is too common.
        let one_time_code = w == "code" && CODE_KINDS.contains(&prev.trim_end_matches('s'));
        prev = w.to_string();
        one_time_code || TOKEN_WORDS.contains(&w) || w.starts_with("idem") || w.starts_with("dedup")
    })
}

/// Words that make `token` an asset or a piece of text rather than a one-time credential: a
/// chain's token standards, ecash, what a wallet or an index does with tokens.
const ASSET_TOKEN_WORDS: &[&str] = &[
    "erc20", "erc721", "erc1155", "trc20", "tip3", "spl", "nft", "fungible", "ecash", "cashu",
    "coin", "balance", "supply", "decimal", "holder", "output", "contract", "bucket", "delta",
    "metadata",
];

/// The words before `code` that make it a one-time credential: an OAuth authorization or
/// device code (`oauth_codes`, `oidc_codes`), a login, verification or recovery code.
const CODE_KINDS: &[&str] = &[
    "auth",
    "oauth",
    "oauth2",
    "oidc",
    "authorization",
    "authorisation",
    "device",
    "login",
    "verification",
    "verify",
    "confirmation",
    "confirm",
    "recovery",
    "backup",
    "pairing",
    "mfa",
    "sms",
    "email",
];

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

/// Words that name a state column (`status`, `order_state`, `lifecycle_stage`).
const STATE_WORDS: &[&str] = &["status", "state", "stage", "phase", "step", "lifecycle"];

/// Lifecycle states as services name them.
const LIFECYCLE_WORDS: &[&str] = &[
    "pending",
    "queued",
    "scheduled",
    "created",
    "open",
    "active",
    "processing",
    "running",
    "started",
    "claimed",
    "locked",
    "reserved",
    "inflight",
    "paid",
    "unpaid",
    "authorized",
    "captured",
    "settled",
    "shipped",
    "delivered",
    "fulfilled",
    "completed",
    "complete",
    "done",
    "finished",
    "succeeded",
    "success",
    "failed",
    "failure",
    "cancelled",
    "canceled",
    "expired",
    "refunded",
    "rejected",
    "approved",
    "confirmed",
    "unconfirmed",
    "verified",
    "spent",
    "unspent",
    "retried",
    "aborted",
    "closed",
    "archived",
    "suspended",
    "published",
    "merged",
    "issued",
    "redeemed",
];

/// A state value that records a definite failure or an abandonment (`FAILED`, `Declined`,
/// `cancelled`, `error`), as opposed to an unknown outcome or a pending one.
pub fn is_failure_value(value: &str) -> bool {
    let last = value.rsplit("::").next().unwrap_or(value);
    let joined: String = words(last).collect();
    if matches!(
        joined.as_str(),
        "failed"
            | "failure"
            | "fail"
            | "error"
            | "errored"
            | "cancelled"
            | "canceled"
            | "declined"
            | "rejected"
            | "aborted"
            | "paymentfailed"
            | "chargefailed"
    ) {
        return true;
    }
    // One identifier whose last word is the failure (`JOB_STATE_FAILED`, `upload_failed`,
    // `PaymentDeclined`), not a message (`'Failed forever'`) and not its negation (`NOT_FAILED`).
    if !last.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return false;
    }
    let words: Vec<String> = words(last).collect();
    words.len() > 1
        && !words
            .iter()
            .any(|w| matches!(w.as_str(), "not" | "no" | "non" | "un" | "without"))
        && words.last().is_some_and(|w| {
            matches!(
                w.as_str(),
                "failed"
                    | "failure"
                    | "errored"
                    | "cancelled"
                    | "canceled"
                    | "declined"
                    | "rejected"
                    | "aborted"
            )
        })
}

/// A test double by its type's name (`MockDb`, `FakeGateway`, `StubStore`): its methods stand
/// in for the real ones in tests.
pub fn is_test_double(ty: &str) -> bool {
    ["Mock", "Fake", "Stub"].iter().any(|w| {
        ty.strip_prefix(w)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_uppercase))
    })
}

/// A state value that records work as done (`COMPLETED`, `sent`, `Delivered`, `processed`):
/// written after a unit of work, it tells everyone that nothing is left to do.
pub fn is_done_value(value: &str) -> bool {
    let last = value.rsplit("::").next().unwrap_or(value);
    let joined: String = words(last).collect();
    matches!(
        joined.as_str(),
        "done"
            | "completed"
            | "complete"
            | "finished"
            | "succeeded"
            | "success"
            | "successful"
            | "processed"
            | "sent"
            | "delivered"
            | "handled"
            | "acked"
            | "acknowledged"
    )
}

/// A function that undoes a remote effect or its local record (`refund`, `compensate`,
/// `revert_charge`, `reverse_transfer`): run on a timeout, it undoes what may have happened.
pub fn is_compensation(name: &str) -> bool {
    words(name).any(|w| {
        matches!(
            w.as_str(),
            "refund" | "compensate" | "compensation" | "revert" | "reverse"
        )
    })
}

/// The value words of work in progress (`PROCESSING`, `InProgress`, `running`).
const IN_PROGRESS: &[&str] = &[
    "processing",
    "inprogress",
    "running",
    "locked",
    "claimed",
    "executing",
    "inflight",
    "started",
    "working",
    "busy",
];

/// A column named like a state: `status`, `order_state`, `PaymentStatus` (the state word last:
/// `status_code` is a number, not a state).
pub fn is_state_column(name: &str) -> bool {
    words(name.rsplit('.').next().unwrap_or(name))
        .last()
        .is_some_and(|w| STATE_WORDS.contains(&w.as_str()))
}

/// A value that names a lifecycle state: a constant of a state-named type (`OrderStatus::Paid`,
/// `State::Spent`), or a lifecycle word (`'paid'`, `"PROCESSING"`, `JobStatus::InProgress`).
pub fn is_state_value(value: &str) -> bool {
    let mut segments = value.rsplit("::");
    let last = segments.next().unwrap_or(value);
    if segments.next().is_some_and(is_state_column) {
        return true;
    }
    // A value, not a message: one identifier (`'paid'`, `IN_PROGRESS`), not `'Failed forever'`.
    if !last
        .chars()
        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
    {
        return false;
    }
    let w: Vec<String> = words(last).collect();
    !w.is_empty() && w.len() <= 2 && w.iter().any(|x| LIFECYCLE_WORDS.contains(&x.as_str()))
        || is_in_progress_value(value)
}

/// A value that claims work as in progress: `PROCESSING`, `in_progress`, `JobState::Running`,
/// `'locked'`.
pub fn is_in_progress_value(value: &str) -> bool {
    let last = value.rsplit("::").next().unwrap_or(value);
    let joined: String = words(last).collect();
    IN_PROGRESS.contains(&joined.as_str())
}

/// An in-progress value that always means a claim (`PROCESSING`, `IN_PROGRESS`, `CLAIMED`),
/// unlike `running` or `started`, which also describe a server or a deployment that is up, and
/// `locked`, which also describes funds held in escrow or an account shut.
pub fn is_claim_word(value: &str) -> bool {
    let last = value.rsplit("::").next().unwrap_or(value);
    let joined: String = words(last).collect();
    matches!(
        joined.as_str(),
        "processing" | "inprogress" | "claimed" | "inflight"
    )
}

/// A table or type of units of work: jobs, tasks, builds, runs, steps, attempts, executions,
/// operations, messages of a queue.
pub fn is_work(name: &str) -> bool {
    words(name).any(|w| {
        matches!(
            w.trim_end_matches('s'),
            "job"
                | "task"
                | "work"
                | "queue"
                | "run"
                | "build"
                | "step"
                | "execution"
                | "attempt"
                | "batch"
                | "workflow"
                | "operation"
                | "message"
                | "import"
                | "export"
                | "sync"
                | "migration"
                | "request"
        )
    })
}

/// A boolean column that claims a record while it is worked on: `locked`, `in_progress`,
/// `is_processing`, `running`.
pub fn is_progress_flag(column: &str) -> bool {
    let joined: String = words(column).filter(|w| w != "is").collect();
    IN_PROGRESS.contains(&joined.as_str())
}

/// A column that bounds a claim in time: `lease_expires_at`, `locked_until`, `visible_at`,
/// `vt`, `heartbeat_at`, `deadline`, `expires_at`, `timeout_at`.
pub fn is_expiry_column(column: &str) -> bool {
    words(column).any(|w| {
        matches!(
            w.as_str(),
            "lease"
                | "leased"
                | "until"
                | "expire"
                | "expires"
                | "expiry"
                | "expiration"
                | "deadline"
                | "heartbeat"
                | "visible"
                | "visibility"
                | "vt"
                | "timeout"
                | "ttl"
                | "keepalive"
        )
    })
}

/// A column that names who holds a claim: `owner`, `worker_id`, `locked_by`, `claimed_by`,
/// `runner_id`, `instance_id`, `node`, or the claim's own id (`payment_attempt_id`,
/// `lease_id`): a completion that compares it refuses an older holder.
pub fn is_owner_column(column: &str) -> bool {
    let w: Vec<String> = words(column).collect();
    let claim_id = w.last().is_some_and(|x| x == "id")
        && w.iter().any(|x| {
            matches!(
                x.as_str(),
                "attempt" | "operation" | "execution" | "lease" | "claim" | "lock"
            )
        });
    claim_id
        || w.last().is_some_and(|x| x == "by")
        || w.iter().any(|x| {
            matches!(
                x.as_str(),
                "owner"
                    | "worker"
                    | "runner"
                    | "instance"
                    | "node"
                    | "host"
                    | "hostname"
                    | "server"
                    | "executor"
                    | "consumer"
                    | "holder"
                    | "pid"
                    | "agent"
            )
        })
}

/// A column that fences a write to one round of a record: a version, generation, revision,
/// etag, epoch, fencing token, lease, owner, nonce, attempt or operation / reservation id.
pub fn is_fencing_column(column: &str) -> bool {
    words(column).any(|w| {
        matches!(
            w.as_str(),
            "version"
                | "generation"
                | "gen"
                | "revision"
                | "rev"
                | "etag"
                | "epoch"
                | "fence"
                | "fencing"
                | "lease"
                | "owner"
                | "token"
                | "nonce"
                | "attempt"
                | "reservation"
                | "operation"
                | "op"
                | "cas"
                | "lock"
                | "locked"
        )
    }) || is_owner_column(column)
}

/// A column that counts the rounds of a record (`version`, `definition_generation`, `epoch`,
/// `attempt`): it exists to change, so a test of it is never a test of something settled.
pub fn is_round_column(column: &str) -> bool {
    words(column).any(|w| {
        matches!(
            w.as_str(),
            "version" | "generation" | "gen" | "revision" | "rev" | "etag" | "epoch" | "attempt"
        )
    })
}

/// A column marking a record deleted (`deleted`, `is_deleted`, `deleted_at`, `time_deleted`):
/// a filter on it keeps a write off records already gone.
pub fn is_deletion_marker(column: &str) -> bool {
    words(column).any(|w| matches!(w.as_str(), "deleted" | "removed" | "archived"))
}

/// A column holding a point in time: `updated_at`, `started_time`, `heartbeat`, `ts`.
pub fn is_time_column(column: &str) -> bool {
    let w: Vec<String> = words(column).collect();
    w.last().is_some_and(|x| {
        matches!(
            x.as_str(),
            "at" | "time" | "ts" | "timestamp" | "date" | "on" | "until" | "heartbeat"
        )
    }) || is_expiry_column(column)
}

/// A time column whose stamp claims a record (`started_at`, `locked_at`, `claimed_at`,
/// `reserved_at`, `checked_out_at`, `dequeued_at`): set where it was `NULL`, it says the
/// record is taken. Off a table of work (`outside_work`), the words that also mark a thing
/// that merely began (`started`, `running`: a game, a meeting) are left out.
pub fn is_claim_time_column(column: &str, outside_work: bool) -> bool {
    is_time_column(column)
        && !is_expiry_column(column)
        && words(column).any(|w| match w.as_str() {
            "started" | "running" | "processing" => !outside_work,
            "locked" | "claimed" | "picked" | "checked" | "dequeued" | "fetched" | "reserved"
            | "acquired" => true,
            _ => false,
        })
}

/// A time column that says since when a record is held (`started_at`, `processing_started_at`,
/// `heartbeat_at`, `locked_at`, `updated_at`, a lease's expiry), as opposed to when it is due
/// (`scheduled_at`, `run_at`, `available_at`): a hand-out filtering on it takes held records
/// back.
pub fn is_hold_time_column(column: &str) -> bool {
    is_time_column(column)
        && (is_expiry_column(column)
            || words(column).any(|w| {
                matches!(
                    w.as_str(),
                    "started"
                        | "start"
                        | "heartbeat"
                        | "locked"
                        | "lease"
                        | "claimed"
                        | "picked"
                        | "processing"
                        | "updated"
                        | "touched"
                        | "attempted"
                        | "fetched"
                )
            }))
}

/// The words of a message received from outside, as a route path or a handler's name says
/// them (`/webhooks/stripe`, `payment_callback`, `/ipn`, `on_payment_event`).
const MESSAGE_WORDS: &[&str] = &[
    "callback",
    "webhook",
    "hook",
    "ipn",
    "notify",
    "notification",
    "event",
];

/// A route path that receives messages: `/webhooks/stripe`, `/payment-callback`, `/ipn`,
/// `/notify`, `/events`.
pub fn is_message_route(path: &str) -> bool {
    words(path).any(|w| MESSAGE_WORDS.contains(&w.trim_end_matches('s')))
}

/// A function named as the receiver of a message: `stripe_webhook`, `payment_callback`,
/// `handle_ipn`, or a handling verb with a message word (`handle_payment_event`,
/// `on_notification`, `process_hook`). `notify_customer` sends, it does not receive.
pub fn is_message_handler_name(name: &str) -> bool {
    let w: Vec<String> = words(name).collect();
    let has = |x: &[&str]| w.iter().any(|y| x.contains(&y.trim_end_matches('s')));
    has(&["callback", "webhook", "ipn"])
        || w.first()
            .is_some_and(|f| HANDLING_VERBS.contains(&f.as_str()))
            && has(&["event", "notification", "hook"])
}

/// The first word of a function that handles what it is given (`handle_..`, `on_..`).
const HANDLING_VERBS: &[&str] = &["handle", "on", "process", "consume", "receive", "apply"];

/// A function named as a dispatch target (`handle_pull_request_closed`, `on_refund`): what a
/// message handler hands each kind of message to.
pub fn is_dispatch_target_name(name: &str) -> bool {
    let mut w = words(name);
    w.next()
        .is_some_and(|f| matches!(f.as_str(), "handle" | "on" | "process" | "handler"))
        || w.any(|x| x == "handler")
}

/// A source path whose folders or file say it holds message handlers (`src/webhooks/stripe.rs`,
/// `hooks/invoice_events.rs`, `callbacks.rs`).
pub fn is_message_module(path: &str) -> bool {
    words(path).any(|w| {
        matches!(
            w.trim_end_matches('s'),
            "webhook" | "hook" | "callback" | "ipn"
        )
    })
}

/// A place a test reads that holds a record's state or the identity of its round: `status`,
/// `order.state`, `is_paid`, `cancelled`, `attempt_id`, `version`.
pub fn is_state_place(place: &str) -> bool {
    let last = place.rsplit('.').next().unwrap_or(place);
    is_state_column(last) || is_state_value(last) || is_fencing_column(last)
}

/// A parameter type that carries a message received from outside: `Json<PaymentWebhook>`,
/// `StripeCallback`, `Request<ShipmentNotification>`, `IpnPayload` (the type's own name, not
/// its wrappers).
pub fn is_message_type(name: &str) -> bool {
    let last = name.rsplit("::").next().unwrap_or(name);
    words(last).any(|w| {
        matches!(
            w.trim_end_matches('s'),
            "webhook" | "callback" | "notification" | "ipn"
        )
    })
}

/// A parameter named as the message a handler was given (`event`, `payload`, `msg`).
pub fn is_message_param_name(name: &str) -> bool {
    words(name).any(|w| {
        matches!(
            w.as_str(),
            "event"
                | "message"
                | "msg"
                | "payload"
                | "delivery"
                | "notification"
                | "webhook"
                | "callback"
                | "job"
                | "request"
                | "req"
                | "ev"
                | "evt"
        )
    })
}

/// A whole object's version — `version`, `lock_version`, `row_version`, `revision`, `etag`,
/// `order_version` — as opposed to the identity of one operation (`attempt_version`,
/// `payment_generation`, `reservation_id`): any edit of the object bumps it.
pub fn is_whole_version(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let w: Vec<String> = words(last).collect();
    let Some((v, rest)) = w.split_last() else {
        return false;
    };
    matches!(v.as_str(), "version" | "revision" | "rev" | "etag")
        && rest.len() <= 1
        && rest
            .iter()
            .all(|x| !OP_WORDS.contains(&x.as_str()) && x != "schema" && x != "api")
}

/// A type of a stored record: a database row or model (`ScheduledEventRow`, `JobRecord`,
/// `OrderModel`, `invoice::Entity`).
pub fn is_stored_record_type(name: &str) -> bool {
    words(name).last().is_some_and(|w| {
        matches!(
            w.as_str(),
            "row" | "rows" | "record" | "records" | "model" | "entity"
        )
    })
}

/// An event type (`PaymentEvent`, `InvoiceEvent`): a message when a handling function takes it.
pub fn is_event_type(name: &str) -> bool {
    let last = name.rsplit("::").next().unwrap_or(name);
    words(last)
        .last()
        .is_some_and(|w| w.trim_end_matches('s') == "event")
}

/// Names an idempotency, request or dedup record — a table, entity, type or Redis key
/// (`idempotency_keys`, `idem:{}`, `message_dedup`, `processed_events`, `inbox`,
/// `api_requests`) — as opposed to a domain record that may happen to be unique.
pub fn is_idempotency_record(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    if lower.contains("idempot") || lower.contains("dedup") {
        return true;
    }
    let w: Vec<String> = words(name)
        .map(|w| w.trim_end_matches('s').to_string())
        .collect();
    let has = |x: &str| w.iter().any(|y| y == x);
    has("idem")
        || has("inbox")
        // A record of handled deliveries: `processed_messages`, `handled_events`, `seen_webhooks`.
        || ["processed", "handled", "seen", "consumed", "received"].iter().any(|p| has(p))
            && ["message", "msg", "event", "webhook", "delivery", "request", "callback", "notification", "update", "activity", "activitie"]
                .iter()
                .any(|x| has(x))
        // A log of requests, not a domain object requested (`friend_requests`).
        || has("request")
            && w.iter().all(|x| {
                matches!(x.as_str(), "request" | "api" | "http" | "client" | "incoming" | "log" | "record")
            })
}

/// A column holding the identity a duplicate repeats: an idempotency key, a request or
/// operation id, a delivery id (`message_id` and `event_id` name domain records too often).
pub fn is_request_key_column(column: &str) -> bool {
    let lower = column.to_ascii_lowercase();
    lower.contains("idempot")
        || lower.contains("dedup")
        || matches!(
            lower.as_str(),
            "idem_key"
                | "request_id"
                | "request_key"
                | "operation_id"
                | "delivery_id"
                | "requestid"
                | "operationid"
        )
}

/// A column that stores the answer given to a request (`response_body`, `response_status`).
pub fn is_response_column(column: &str) -> bool {
    words(column).any(|w| w == "response")
}

/// A constant that names a unique-key conflict: an error kind (sqlx's and diesel's
/// `UniqueViolation`, sea-orm's `UniqueConstraintViolation` and `RecordNotInserted`,
/// tokio-postgres' `SqlState::UNIQUE_VIOLATION`) or a code (SQLSTATE 23505, MySQL 1062,
/// SQLite 2067 and 1555).
pub fn is_unique_violation_value(value: &str) -> bool {
    let last = value.rsplit("::").next().unwrap_or(value);
    matches!(
        last,
        "UniqueViolation"
            | "UNIQUE_VIOLATION"
            | "UniqueConstraintViolation"
            | "RecordNotInserted"
            | "DuplicateKey"
            | "ER_DUP_ENTRY"
            | "23505"
            | "1062"
            | "2067"
            | "1555"
    )
}

/// A crate's own error variant saying the record exists (`StoreError::AlreadyExists`,
/// `Error::Duplicate`, `Conflict`): how a helper hands a unique violation to its callers.
pub fn is_conflict_variant(value: &str) -> bool {
    let last = value.rsplit("::").next().unwrap_or(value);
    last.starts_with("Already")
        || last.starts_with("Duplicate")
        || last.ends_with("Exists")
        || last == "Conflict"
        || is_unique_violation_value(last)
}

/// A column set to say a one-time thing was used: the time of its use (`used_at`,
/// `consumed_at`, `exchanged_at`, `redeemed_at`, `spent_at`; not a `last_used_at`, which any
/// use moves), or such a flag (`used`, `redeemed`) set to `true` (or `1`, SQLite's and
/// MySQL's true).
pub fn is_consumption_mark(column: &str, set_to: Option<&str>) -> bool {
    let words: Vec<String> = words(column).collect();
    let used = |w: &str| matches!(w, "used" | "consumed" | "exchanged" | "redeemed" | "spent");
    match words.as_slice() {
        [.., last, _, _] if last == "last" => false,
        [.., verb, at] if at == "at" => used(verb),
        [.., flag] => used(flag) && matches!(set_to, Some("true" | "1")),
        [] => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumption_marks() {
        assert!(is_consumption_mark("redeemed_at", None));
        assert!(is_consumption_mark("used", Some("true")));
        assert!(is_consumption_mark("used", Some("1")));
        assert!(!is_consumption_mark("used", Some("0")));
        assert!(!is_consumption_mark("used", Some("false")));
        assert!(!is_consumption_mark("last_used_at", None));
    }

    #[test]
    fn failure_values_and_look_alikes() {
        for v in [
            "failed",
            "OrderState::Failed",
            "payment_failed",
            "JOB_STATE_FAILED",
            "PaymentDeclined",
            "UPLOAD_ABORTED",
        ] {
            assert!(is_failure_value(v), "{v}");
        }
        for v in [
            "unknown",
            "NOT_FAILED",
            "failed_attempts",
            "Failed forever, gave up",
            "JOB_STATE_PENDING",
            "failover",
        ] {
            assert!(!is_failure_value(v), "{v}");
        }
    }

    #[test]
    fn hold_times_are_not_due_times() {
        for c in [
            "started_at",
            "processing_started_at",
            "heartbeat_at",
            "locked_at",
            "updated_at",
            "lease_expires_at",
            "locked_until",
        ] {
            assert!(is_hold_time_column(c), "{c}");
        }
        for c in [
            "scheduled_at",
            "run_at",
            "available_at",
            "created_at",
            "status",
        ] {
            assert!(!is_hold_time_column(c), "{c}");
        }
    }

    #[test]
    fn idempotency_records_and_their_keys() {
        for t in [
            "idempotency_keys",
            "idem:{}",
            "message_dedup",
            "processed_events",
            "inbox",
            "api_request",
            "requests",
            "dedup:capture:{}",
            "ProcessedMessage",
        ] {
            assert!(is_idempotency_record(t), "{t}");
        }
        for t in [
            "users",
            "friend_requests",
            "benchmark_request",
            "processed_log_files",
            "events",
            "coupons",
            "lock:index:{}",
        ] {
            assert!(!is_idempotency_record(t), "{t}");
        }
        assert!(is_request_key_column("idempotency_key") && is_request_key_column("request_id"));
        assert!(!is_request_key_column("message_id") && !is_request_key_column("email"));
        assert!(
            is_unique_violation_value("SqlState::UNIQUE_VIOLATION")
                && is_unique_violation_value("23505")
        );
        assert!(
            !is_unique_violation_value("Some") && !is_unique_violation_value("ForeignKeyViolation")
        );
        assert!(
            is_conflict_variant("StoreError::AlreadyExists") && is_conflict_variant("Duplicate")
        );
        assert!(!is_conflict_variant("StoreError::Db"));
    }

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
        assert!(is_token_name("oauth2_authorization_codes"));
        assert!(is_token_name("Cache::AuthCode"));
        assert!(is_token_name("device_code"));
        assert!(is_token_name("BackupCodes"));
        assert!(!is_token_name("country_code"));
        assert!(!is_token_name("code"));
        assert!(!is_token_name("source_code"));
        assert!(is_token_name("Cache::Webauthn"));
        assert!(is_token_name("WebauthnServiceReq"));
        assert!(!is_token_name("webauthn_user_id"));
        // Tokens that are assets or text, not credentials.
        assert!(!is_token_name("erc20_token_transfers"));
        assert!(!is_token_name("Erc20TokenTransfers"));
        assert!(!is_token_name("token_outputs"));
        assert!(!is_token_name("cashu_escrow_token"));
        assert!(!is_token_name("token_deltas"));
        // Another word still names a credential.
        assert!(is_token_name("transfer_invite_token"));
        assert!(is_token_name("refresh_tokens"));
    }

    #[test]
    fn state_words() {
        for (col, state) in [
            ("status", true),
            ("order_state", true),
            ("PaymentStatus", true),
            ("stated_amount", false),
            ("response_status_code", false),
            ("name", false),
        ] {
            assert_eq!(is_state_column(col), state, "{col}");
        }
        for (v, state) in [
            ("paid", true),
            ("PROCESSING", true),
            ("OrderStatus::Cancelled", true),
            ("State::Spent", true),
            ("Kind::Admin", false),
            ("hello world again", false),
            ("Failed forever", false),
            ("alice", false),
        ] {
            assert_eq!(is_state_value(v), state, "{v}");
        }
        for (v, busy) in [
            ("IN_PROGRESS", true),
            ("JobStatus::InProgress", true),
            ("running", true),
            ("pending", false),
            ("Running::Later", false),
        ] {
            assert_eq!(is_in_progress_value(v), busy, "{v}");
        }
        assert!(is_progress_flag("is_locked") && is_progress_flag("in_progress"));
        assert!(!is_progress_flag("locked_at"));
        assert!(is_expiry_column("locked_until") && is_expiry_column("lease_expires_at"));
        assert!(is_expiry_column("vt") && !is_expiry_column("updated_at"));
        assert!(is_owner_column("locked_by") && is_owner_column("worker_id"));
        assert!(!is_owner_column("user_id") && !is_owner_column("status"));
        assert!(is_owner_column("payment_attempt_id") && !is_owner_column("attempts"));
        assert!(!is_owner_column("attempt_count"));
        assert!(is_time_column("updated_at") && !is_time_column("attempts"));
    }

    #[test]
    fn resource_ids() {
        assert!(is_resource_id("seat_id"));
        assert!(is_resource_id("job.order_id"));
        assert!(!is_resource_id("amount"));
    }
}
