//! One command run inside a batch's transaction: authentication, the engine's decision,
//! and what the batch keeps of it.

use super::*;

/// What a batch has produced so far.
pub(super) struct BatchState {
    pub(super) pending: Vec<Pending>,
    pub(super) failure: Option<crate::store::StoreError>,
    pub(super) shutdown: bool,
}

/// The parts of the writer a request executes with, borrowed beside the open transaction.
pub(super) struct ExecContext<'a> {
    pub(super) engine: &'a mut Engine,
    pub(super) metrics: &'a Metrics,
    pub(super) signup: SignupMode,
    /// Whether the commands executed are counted in the metrics.
    pub(super) counted: bool,
}

impl ExecContext<'_> {
    /// Checks a token (a store error fails the batch, and the answer is `internal`).
    pub(super) fn authenticate(
        &mut self,
        tx: Option<&mut (dyn crate::store::WriteTx + '_)>,
        now: i64,
        token: &str,
        via: Via,
        state: &mut BatchState,
    ) -> Result<PrincipalRecord, Refusal> {
        match tx {
            Some(tx) => match self.engine.authenticate(tx, now, token, via) {
                Ok(result) => result,
                Err(error) => {
                    state.failure = Some(error.into());
                    Err(internal())
                }
            },
            None => Err(internal()),
        }
    }

    /// Counts a command executed, and how long it waited for the writer.
    pub(super) fn count(&self, submitted: Instant) {
        if self.counted {
            self.metrics.commands.fetch_add(1, Ordering::Relaxed);
            self.metrics
                .writer_queue_latency
                .observe(submitted.elapsed());
        }
    }

    /// Executes one request in `tx` (answering `internal` once the batch has failed).
    pub(super) fn execute(
        &mut self,
        tx: Option<&mut (dyn crate::store::WriteTx + '_)>,
        now: i64,
        request: Request,
        state: &mut BatchState,
    ) {
        let tx = tx.filter(|_| state.failure.is_none());
        match request {
            Request::Command {
                caller,
                command,
                submitted,
                permit,
            } => {
                self.count(submitted);
                let result = answer(
                    tx.map(|tx| self.engine.execute(tx, now, &caller, &command)),
                    &mut state.failure,
                );
                state.pending.push(Pending::Command {
                    caller,
                    command,
                    submitted,
                    permit,
                    result,
                });
            }
            Request::Auth {
                token,
                device,
                conn,
                reply,
            } => {
                let result = self.authenticate(tx, now, &token, Via::Ws, state);
                state.pending.push(Pending::Auth {
                    token,
                    conn,
                    device,
                    reply,
                    result,
                });
            }
            Request::Signup { request, reply } => {
                let result = answer(
                    tx.map(|tx| self.engine.signup(tx, now, self.signup, request.clone())),
                    &mut state.failure,
                );
                state.pending.push(Pending::Signup {
                    request,
                    reply,
                    result,
                });
            }
            Request::Call {
                caller,
                command,
                submitted,
                reply,
            } => {
                self.count(submitted);
                let result = answer(
                    tx.map(|tx| self.engine.execute(tx, now, &caller, &command)),
                    &mut state.failure,
                );
                state.pending.push(Pending::Call {
                    caller,
                    command,
                    submitted,
                    reply,
                    result,
                });
            }
            Request::Authenticate { token, via, reply } => {
                let result = self.authenticate(tx, now, &token, via, state);
                state.pending.push(Pending::Authenticated {
                    token,
                    via,
                    reply,
                    result,
                });
            }
            Request::Refused(refused) => {
                if let Some(tx) = tx
                    && let Err(error) = self.engine.audit_refusal(
                        tx,
                        now,
                        &refused.principal,
                        refused.action,
                        refused.target.clone(),
                        &refused.refusal,
                        refused.via,
                    )
                {
                    state.failure = Some(error.into());
                }
                state.pending.push(Pending::Refused(refused));
            }
            Request::Operator { request, reply } => {
                let crate::operator::OperatorRequest::UserToken { handle, action } = &request;
                let result = answer(
                    tx.map(|tx| self.engine.operator_user_token(tx, now, handle, *action)),
                    &mut state.failure,
                );
                state.pending.push(Pending::Operator {
                    request,
                    reply,
                    result,
                });
            }
            Request::Shutdown => state.shutdown = true,
        }
    }
}
