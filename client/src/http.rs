//! [`Client`]: the API of one node, typed. [`http_client`] is the one place where electd's HTTP
//! clients are configured (the node's peer transport builds on it too).

use std::time::Duration;

use serde::de::DeserializeOwned;

pub use crate::error::Error;
use crate::roles::{
    NodeRoleLimit, RoleClaimInfo, RoleInfo, RoleLimit, RoleName, RolePreferred, RoleResign,
    RoleResigned, RolesPage, Token,
};
use crate::watch::{RoleWatch, Watch};
use crate::wire::{
    AddMember, ErrorBody, EventsPage, FaultSet, Health, LeaderInfo, Members, NodeId, ResignRequest,
    Resigned, Status,
};

/// How long electd's clients keep an idle connection: well below the server's header read
/// timeout (5 s, `src/server.rs`), so that a client never reuses a connection the server is
/// closing.
pub const CLIENT_IDLE: Duration = Duration::from_secs(2);

/// A reqwest builder with electd's settings: no proxy (nodes are on local or cluster addresses),
/// no Nagle delay, and idle connections dropped after [`CLIENT_IDLE`].
pub fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_idle_timeout(CLIENT_IDLE)
}

/// [`http_client`] over TLS: trusts only `ca_pem` (the cluster CA, PEM), not the system's
/// roots; with `identity_pem` (a certificate chain and its private key, PEM) presents that
/// client certificate, for an admin API that asks for one.
pub fn tls_client(
    ca_pem: &[u8],
    identity_pem: Option<&[u8]>,
) -> Result<reqwest::ClientBuilder, reqwest::Error> {
    let mut builder = http_client()
        .use_rustls_tls()
        .tls_built_in_root_certs(false);
    for cert in reqwest::Certificate::from_pem_bundle(ca_pem)? {
        builder = builder.add_root_certificate(cert);
    }
    if let Some(identity) = identity_pem {
        builder = builder.identity(reqwest::Identity::from_pem(identity)?);
    }
    Ok(builder)
}

/// The API of one node at `addr` (`ip:port`).
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    addr: String,
    /// `http`, or `https` for a node that serves TLS.
    scheme: &'static str,
    admin_token: Option<String>,
    /// Bound of each request (a watch stream: of its first answer), when the client sets one.
    timeout: Option<Duration>,
}

impl Client {
    /// A client for the node at `addr`, whose every request ends after `timeout` (a watch
    /// stream must begin within it).
    pub fn new(addr: impl Into<String>, timeout: Duration) -> Client {
        let http = http_client()
            .connect_timeout(timeout)
            .build()
            .expect("reqwest client builds");
        Client {
            timeout: Some(timeout),
            ..Client::with_http(http, addr)
        }
    }

    /// A client over TLS for the node at `addr`, trusting the cluster CA `ca_pem` (and
    /// presenting `identity_pem`, see [`tls_client`]), whose every request ends after `timeout`.
    pub fn new_tls(
        addr: impl Into<String>,
        timeout: Duration,
        ca_pem: &[u8],
        identity_pem: Option<&[u8]>,
    ) -> Result<Client, reqwest::Error> {
        let http = tls_client(ca_pem, identity_pem)?
            .connect_timeout(timeout)
            .build()?;
        Ok(Client {
            timeout: Some(timeout),
            ..Client::with_http(http, addr).https()
        })
    }

    /// A client for the node at `addr` on a shared connection pool (whose settings bound
    /// its requests).
    pub fn with_http(http: reqwest::Client, addr: impl Into<String>) -> Client {
        Client {
            http,
            addr: addr.into(),
            scheme: "http",
            admin_token: None,
            timeout: None,
        }
    }

    /// Speaks HTTPS to the node (its pool must trust the node's CA: [`tls_client`]).
    pub fn https(mut self) -> Client {
        self.scheme = "https";
        self
    }

    /// Bounds each request by `timeout` instead.
    pub fn timeout(mut self, timeout: Duration) -> Client {
        self.timeout = Some(timeout);
        self
    }

    /// Sends `Authorization: Bearer <token>` with admin requests.
    pub fn admin_token(mut self, token: Option<String>) -> Client {
        self.admin_token = token;
        self
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.addr)
    }

    fn admin(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.admin_token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    pub(crate) fn http_error(&self, source: reqwest::Error) -> Error {
        Error::http(&self.addr, source, self.scheme == "https")
    }

    /// `req` bounded by the client's timeout, if it has one.
    fn bounded(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self.timeout {
            Some(t) => req.timeout(t),
            None => req,
        }
    }

    /// Sends `req` (bounded) and reads its whole answer: the status and the body.
    async fn answer(&self, req: reqwest::RequestBuilder) -> Result<(u16, Vec<u8>), Error> {
        let res = self
            .bounded(req)
            .send()
            .await
            .map_err(|e| self.http_error(e))?;
        let status = res.status().as_u16();
        let bytes = res.bytes().await.map_err(|e| self.http_error(e))?;
        Ok((status, bytes.into()))
    }

    /// The body of an answer with `status` as the contract's JSON.
    fn decode<T: DeserializeOwned>(&self, status: u16, bytes: &[u8]) -> Result<T, Error> {
        serde_json::from_slice(bytes).map_err(|e| Error::Decode {
            addr: self.addr.clone(),
            status,
            message: e.to_string(),
        })
    }

    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T, Error> {
        let (status, bytes) = self.answer(req).await?;
        if (200..300).contains(&status) {
            return self.decode(status, &bytes);
        }
        Err(self.refusal(status, &bytes))
    }

    /// An error answer: the contract's error body, or whatever came.
    pub(crate) fn refusal(&self, status: u16, bytes: &[u8]) -> Error {
        match serde_json::from_slice::<ErrorBody>(bytes) {
            Ok(body) => Error::Api {
                addr: self.addr.clone(),
                status,
                body,
            },
            Err(_) => Error::Decode {
                addr: self.addr.clone(),
                status,
                message: String::from_utf8_lossy(bytes).into_owned(),
            },
        }
    }

    /// `GET /v1/claim`: the node's view, and whether it holds the claim (200) or not (503).
    pub async fn claim(&self) -> Result<(bool, LeaderInfo), Error> {
        let (status, bytes) = self.answer(self.http.get(self.url("/v1/claim"))).await?;
        if status != 200 && status != 503 {
            return Err(self.refusal(status, &bytes));
        }
        Ok((status == 200, self.decode(status, &bytes)?))
    }

    /// `GET /v1/watch`, from the current view, or after event `last_id` (`Last-Event-ID`).
    pub async fn watch(&self, last_id: Option<u64>) -> Result<Watch, Error> {
        let res = self.open_stream("/v1/watch", last_id).await?;
        Ok(Watch::new(self.addr.clone(), res, last_id))
    }

    /// `GET /v1/roles/watch?names=...` (every role when `names` is empty), resumed after
    /// `last_id` when given (quorum mode: elsewhere `409 roles_unsupported`).
    pub async fn watch_roles(
        &self,
        names: &[RoleName],
        last_id: Option<u64>,
    ) -> Result<RoleWatch, Error> {
        let path = match names {
            [] => "/v1/roles/watch".to_string(),
            _ => {
                let names: Vec<&str> = names.iter().map(RoleName::as_str).collect();
                format!("/v1/roles/watch?names={}", names.join(","))
            }
        };
        let res = self.open_stream(&path, last_id).await?;
        Ok(RoleWatch::new(self.addr.clone(), res, last_id))
    }

    /// Opens an event stream at `path`, resumed after `last_id`; the refusal when it is not 200.
    async fn open_stream(
        &self,
        path: &str,
        last_id: Option<u64>,
    ) -> Result<reqwest::Response, Error> {
        let mut req = self.http.get(self.url(path));
        if let Some(id) = last_id {
            req = req.header("last-event-id", id.to_string());
        }
        let answer = req.send();
        let res = match self.timeout {
            Some(t) => tokio::time::timeout(t, answer)
                .await
                .map_err(|_| Error::Silent {
                    addr: self.addr.clone(),
                    silent: t,
                })?,
            None => answer.await,
        }
        .map_err(|e| self.http_error(e))?;
        let status = res.status().as_u16();
        if status != 200 {
            let bytes = res.bytes().await.map_err(|e| self.http_error(e))?;
            return Err(self.refusal(status, &bytes));
        }
        Ok(res)
    }

    /// `GET /v1/leader`.
    pub async fn leader(&self) -> Result<LeaderInfo, Error> {
        self.send(self.http.get(self.url("/v1/leader"))).await
    }

    /// `GET /v1/status`.
    pub async fn status(&self) -> Result<Status, Error> {
        self.send(self.http.get(self.url("/v1/status"))).await
    }

    /// `GET /v1/events?since=SEQ&limit=N`.
    pub async fn events(&self, since: u64, limit: usize) -> Result<EventsPage, Error> {
        let url = self.url(&format!("/v1/events?since={since}&limit={limit}"));
        self.send(self.http.get(url)).await
    }

    /// `GET /v1/health`.
    pub async fn health(&self) -> Result<Health, Error> {
        self.send(self.http.get(self.url("/v1/health"))).await
    }

    /// `GET /metrics`, the Prometheus text.
    pub async fn metrics_text(&self) -> Result<String, Error> {
        let res = self
            .bounded(self.http.get(self.url("/metrics")))
            .send()
            .await
            .map_err(|e| self.http_error(e))?;
        res.text().await.map_err(|e| self.http_error(e))
    }

    /// `GET /v1/admin/faults`.
    pub async fn faults(&self) -> Result<FaultSet, Error> {
        self.send(self.admin(self.http.get(self.url("/v1/admin/faults"))))
            .await
    }

    /// `PUT /v1/admin/faults`: answers the fault set now in force.
    pub async fn set_faults(&self, set: &FaultSet) -> Result<FaultSet, Error> {
        let req = self.http.put(self.url("/v1/admin/faults")).json(set);
        self.send(self.admin(req)).await
    }

    /// `DELETE /v1/admin/faults`.
    pub async fn clear_faults(&self) -> Result<FaultSet, Error> {
        self.send(self.admin(self.http.delete(self.url("/v1/admin/faults"))))
            .await
    }

    /// `POST /v1/admin/resign`, with `{"to": N}` when given.
    pub async fn resign(&self, to: Option<NodeId>) -> Result<Resigned, Error> {
        let mut req = self.http.post(self.url("/v1/admin/resign"));
        if to.is_some() {
            req = req.json(&ResignRequest { to });
        }
        self.send(self.admin(req)).await
    }

    /// `GET /v1/members` (quorum mode).
    pub async fn members(&self) -> Result<Members, Error> {
        self.send(self.http.get(self.url("/v1/members"))).await
    }

    /// `POST /v1/admin/members`: adds `id` at `addr` as a learner, and promotes it to voter
    /// once it has caught up; answers with the membership once the change is committed.
    pub async fn add_member(&self, id: NodeId, addr: &str) -> Result<Members, Error> {
        let body = AddMember {
            id,
            addr: addr.to_string(),
        };
        let req = self.http.post(self.url("/v1/admin/members")).json(&body);
        self.send(self.admin(req)).await
    }

    /// `GET /v1/roles`: the roles after `after` (in name order), at most `limit`.
    pub async fn roles(&self, after: Option<&RoleName>, limit: usize) -> Result<RolesPage, Error> {
        let mut url = format!("/v1/roles?limit={limit}");
        if let Some(a) = after {
            url.push_str(&format!("&after={a}"));
        }
        self.send(self.http.get(self.url(&url))).await
    }

    /// `GET /v1/claim/{name}`: whether this node holds the role's claim (200) or not (503),
    /// and the answer.
    pub async fn role_claim(&self, name: &RoleName) -> Result<(bool, RoleClaimInfo), Error> {
        let url = self.url(&format!("/v1/claim/{name}"));
        let (status, bytes) = self.answer(self.http.get(url)).await?;
        if status != 200 && status != 503 {
            return Err(self.refusal(status, &bytes));
        }
        Ok((status == 200, self.decode(status, &bytes)?))
    }

    /// `PUT` (`stands`) or `DELETE /v1/roles/{name}/candidates/{id}`: answers the role once
    /// the change is applied. Sent with the admin token when the client has one (a node's
    /// own candidacy needs none from its own host).
    pub async fn stand(
        &self,
        name: &RoleName,
        id: NodeId,
        stands: bool,
    ) -> Result<RoleInfo, Error> {
        let url = self.url(&format!("/v1/roles/{name}/candidates/{id}"));
        let req = match stands {
            true => self.http.put(url),
            false => self.http.delete(url),
        };
        self.send(self.admin(req)).await
    }

    /// `POST /v1/roles/{name}/resign`: gives up grant `token` once its promises ended.
    pub async fn resign_role(&self, name: &RoleName, token: Token) -> Result<RoleResigned, Error> {
        let url = self.url(&format!("/v1/roles/{name}/resign"));
        let req = self.http.post(url).json(&RoleResign { token });
        self.send(self.admin(req)).await
    }

    /// `PUT /v1/roles/{name}/preferred` (`Some(node)`) or `DELETE` it (`None`): answers the
    /// role once the setting is applied. Needs the admin token.
    pub async fn prefer(&self, name: &RoleName, node: Option<NodeId>) -> Result<RoleInfo, Error> {
        let url = self.url(&format!("/v1/roles/{name}/preferred"));
        let req = match node {
            Some(node) => self.http.put(url).json(&RolePreferred { node }),
            None => self.http.delete(url),
        };
        self.send(self.admin(req)).await
    }

    /// `GET /v1/members/{id}/max_roles`: how many roles node `id` holds and may hold.
    pub async fn max_roles(&self, id: NodeId) -> Result<NodeRoleLimit, Error> {
        let url = self.url(&format!("/v1/members/{id}/max_roles"));
        self.send(self.http.get(url)).await
    }

    /// `PUT /v1/members/{id}/max_roles` (`Some`) or `DELETE` it (`None`: no limit): answers
    /// once the setting is applied. Sent with the admin token when the client has one (a node's
    /// own limit needs none from its own host).
    pub async fn set_max_roles(
        &self,
        id: NodeId,
        max_roles: Option<u32>,
    ) -> Result<NodeRoleLimit, Error> {
        let url = self.url(&format!("/v1/members/{id}/max_roles"));
        let req = match max_roles {
            Some(max_roles) => self.http.put(url).json(&RoleLimit { max_roles }),
            None => self.http.delete(url),
        };
        self.send(self.admin(req)).await
    }

    /// `DELETE /v1/admin/members/{id}`: the leader hands over first when it removes itself.
    pub async fn remove_member(&self, id: NodeId) -> Result<Members, Error> {
        let req = self
            .http
            .delete(self.url(&format!("/v1/admin/members/{id}")));
        self.send(self.admin(req)).await
    }
}
