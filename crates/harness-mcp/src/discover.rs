//! A `server/discover` answer checked before it is believed: a server of the newest protocol
//! answers it with the versions it speaks, its capabilities and who it is. Any other answer
//! (an empty `{}` from a server that answers every method, a result of another shape) is no
//! server of that version, so the answer is turned into "method not found" and the client
//! falls back to the `initialize` handshake, as it does for a server that says so itself.

use std::future::Future;

use rmcp::RoleClient;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, ErrorCode, ErrorData, RequestId, ServerJsonRpcMessage, ServerResult,
};
use rmcp::transport::Transport;

/// A transport whose answer to `server/discover` is checked.
pub(crate) struct CheckedDiscovery<T> {
    inner: T,
    /// The id of the `server/discover` request whose answer is awaited.
    discover: Option<RequestId>,
}

impl<T> CheckedDiscovery<T> {
    /// `inner`, its discovery answers checked.
    pub(crate) fn new(inner: T) -> Self {
        Self { inner, discover: None }
    }

    /// The message, or "method not found" in place of a discovery answer that is not one.
    fn check(&mut self, message: ServerJsonRpcMessage) -> ServerJsonRpcMessage {
        let ServerJsonRpcMessage::Response(response) = &message else {
            if matches!(&message, ServerJsonRpcMessage::Error(e) if e.id.is_some() && e.id == self.discover) {
                self.discover = None;
            }
            return message;
        };
        if self.discover.as_ref() != Some(&response.id) {
            return message;
        }
        self.discover = None;
        match flaw(&response.result) {
            None => message,
            Some(why) => {
                let error = ErrorData::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "the answer to server/discover is not a discovery ({why}); taken as a server that does not know the method"
                    ),
                    None,
                );
                ServerJsonRpcMessage::error(error, Some(response.id.clone()))
            }
        }
    }
}

/// What is wrong with a discovery answer, if anything: it must be a discovery result, list at
/// least one version, and name the server.
fn flaw(result: &ServerResult) -> Option<&'static str> {
    let ServerResult::DiscoverResult(discovery) = result else {
        return Some("not a discovery result: no supportedVersions or capabilities");
    };
    if discovery.supported_versions.is_empty() {
        return Some("supportedVersions is empty");
    }
    match discovery.server_info() {
        Some(info) if !info.name.trim().is_empty() => None,
        _ => Some("it does not say which server it is (serverInfo)"),
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for CheckedDiscovery<T> {
    type Error = T::Error;

    fn send(&mut self, item: ClientJsonRpcMessage) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let ClientJsonRpcMessage::Request(request) = &item
            && matches!(request.request, ClientRequest::DiscoverRequest(_))
        {
            self.discover = Some(request.id.clone());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        let message = self.inner.receive().await?;
        Some(self.check(message))
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{DiscoverResult, EmptyResult, Implementation, ProtocolVersion, ServerCapabilities};

    fn checked(result: ServerResult) -> ServerJsonRpcMessage {
        let mut transport = CheckedDiscovery::new(());
        transport.discover = Some(RequestId::Number(1));
        transport.check(ServerJsonRpcMessage::response(result, RequestId::Number(1)))
    }

    #[test]
    fn only_a_whole_discovery_is_believed() {
        let empty = checked(ServerResult::EmptyResult(EmptyResult {}));
        let ServerJsonRpcMessage::Error(e) = empty else { panic!("{empty:?}") };
        assert_eq!(e.error.code, ErrorCode::METHOD_NOT_FOUND);
        assert!(e.error.message.contains("not a discovery result"), "{}", e.error.message);

        let mut nameless = DiscoverResult::new(vec![ProtocolVersion::LATEST], ServerCapabilities::default());
        let refused = checked(ServerResult::DiscoverResult(nameless.clone()));
        assert!(matches!(refused, ServerJsonRpcMessage::Error(_)), "{refused:?}");
        nameless.set_server_info(Implementation::new("srv", "1"));
        let whole = checked(ServerResult::DiscoverResult(nameless.clone()));
        assert!(matches!(whole, ServerJsonRpcMessage::Response(_)), "{whole:?}");
        nameless.supported_versions.clear();
        assert!(matches!(checked(ServerResult::DiscoverResult(nameless)), ServerJsonRpcMessage::Error(_)));
    }

    #[test]
    fn other_answers_pass_untouched() {
        let mut transport = CheckedDiscovery::new(());
        transport.discover = Some(RequestId::Number(1));
        let other = ServerJsonRpcMessage::response(ServerResult::EmptyResult(EmptyResult {}), RequestId::Number(2));
        assert!(matches!(transport.check(other), ServerJsonRpcMessage::Response(_)));
        assert!(transport.discover.is_some());
    }
}
