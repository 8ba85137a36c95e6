//! The payment service provider client: every method is an HTTP request.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why a gateway call did not give a definite answer.
#[derive(Debug)]
pub enum GatewayError {
    /// The provider answered and refused: nothing happened, a retry may proceed.
    Declined(u16),
    /// No answer (timeout, connection reset): the charge may or may not have happened.
    Unknown(reqwest::Error),
}

#[derive(Serialize)]
struct ChargeRequest<'a> {
    reference: &'a str,
    amount_cents: i64,
}

#[derive(Deserialize)]
struct ChargeResponse {
    id: String,
}

/// A thin reqwest client for the provider's `/charges` and `/credits` endpoints.
#[derive(Clone)]
pub struct PaymentGateway {
    http: reqwest::Client,
    base_url: String,
}

impl PaymentGateway {
    pub fn new(base_url: &str) -> Self {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("a client without TLS always builds");
        PaymentGateway {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
        }
    }

    /// Charges `amount_cents`; `reference` is the idempotency key the provider deduplicates on.
    pub async fn charge(&self, reference: &str, amount_cents: i64) -> Result<String, GatewayError> {
        self.post("charges", reference, amount_cents).await
    }

    /// Credits `amount_cents` to the customer (voucher payout).
    pub async fn credit(&self, reference: &str, amount_cents: i64) -> Result<String, GatewayError> {
        self.post("credits", reference, amount_cents).await
    }

    async fn post(
        &self,
        path: &str,
        reference: &str,
        amount_cents: i64,
    ) -> Result<String, GatewayError> {
        let resp = self
            .http
            .post(format!("{}/{path}", self.base_url))
            .json(&ChargeRequest {
                reference,
                amount_cents,
            })
            .send()
            .await
            .map_err(GatewayError::Unknown)?;
        if !resp.status().is_success() {
            return Err(GatewayError::Declined(resp.status().as_u16()));
        }
        let body: ChargeResponse = resp.json().await.map_err(GatewayError::Unknown)?;
        Ok(body.id)
    }
}
