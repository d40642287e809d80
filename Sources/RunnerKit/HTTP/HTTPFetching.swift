import Foundation

/// What the engine asks an HTTP client to fetch.
public struct FetchRequest: Sendable {
    /// The URL to fetch with GET: http or https. Redirects are followed from it; the head returned
    /// names the URL that answered.
    public var url: URL
    /// Extra request headers sent to every hop, e.g. `Accept`, `If-None-Match`.
    public var headers: [(name: String, value: String)]
    /// Headers sent only to the origin of `url` (a job's `headers`, which may hold secrets): a
    /// redirect to another scheme, host or port drops them. They replace `headers` of the same name.
    public var originHeaders: [(name: String, value: String)]
    /// Largest body accepted; a larger declared `Content-Length` is refused before any byte is read.
    public var maxBytes: Int
    /// The limit the body's bytes are taken from as they arrive (`--limit-rate`, a host's `limitRate`).
    package var bandwidth: BandwidthLimit?

    /// A request for `url` that accepts at most `maxBytes` of body.
    public init(
        url: URL, headers: [(name: String, value: String)] = [], originHeaders: [(name: String, value: String)] = [],
        maxBytes: Int
    ) {
        self.init(url: url, headers: headers, originHeaders: originHeaders, maxBytes: maxBytes, bandwidth: nil)
    }

    package init(
        url: URL, headers: [(name: String, value: String)] = [], originHeaders: [(name: String, value: String)] = [],
        maxBytes: Int, bandwidth: BandwidthLimit?
    ) {
        self.bandwidth = bandwidth
        self.url = url
        self.headers = headers
        self.originHeaders = originHeaders
        self.maxBytes = maxBytes
    }
}

/// Status line and headers of a response; the body went to the `BodySink`.
public struct FetchResponseHead: Sendable {
    /// The final response's HTTP status, after redirects. Any status is returned, not thrown: what
    /// it means is the caller's business.
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    /// The URL that answered, after redirects.
    public var url: URL

    /// A head as a client returns it; `headers` must have their names in lower case.
    public init(status: Int, headers: [String: String], url: URL) {
        self.status = status
        self.headers = headers
        self.url = url
    }
}

extension FetchResponseHead {
    /// Whether `headers` (names in lower case) name a content coding (gzip, br…): then the body's
    /// bytes are not those its Content-Length and Content-Range count.
    package static func isCoded(_ headers: [String: String]) -> Bool {
        headers["content-encoding"].map { !$0.isEmpty && $0.lowercased() != "identity" } ?? false
    }
}

/// Receives a response body piece by piece, as it arrives (never the whole body at once).
public protocol BodySink: AnyObject, Sendable {
    /// The final response's status and headers (names in lower case), once, before any of its
    /// body (a redirect's are not given); throwing aborts the transfer with that error.
    func begin(status: Int, headers: [String: String]) throws
    /// Takes the next piece of the body; throwing aborts the transfer with that error.
    func write(_ bytes: UnsafeRawBufferPointer) throws
}

extension BodySink {
    public func begin(status: Int, headers: [String: String]) throws {}
}

/// An HTTP client as the engine needs it: one request, the body streamed into a sink.
///
/// Implementations follow redirects to http and https only, refuse any other scheme, honour
/// task cancellation promptly, and rethrow an error thrown by the sink as it was thrown.
public protocol HTTPFetching: Sendable {
    /// Fetches `request`, following redirects, and streams the final response's body into `body`;
    /// returns its status and headers once the body is complete.
    /// - Throws: `FetchError` for a transport failure, `CancellationError` once the task is
    ///   cancelled, and what `body` threw, as it was thrown.
    func fetch(_ request: FetchRequest, into body: any BodySink) async throws -> FetchResponseHead
}

/// A transport failure, in words a user can act on.
public enum FetchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The host name did not resolve; the value is the host. Transient.
    case cannotResolveHost(String)
    /// No connection could be made; the value is the host, with the port when the URL names one.
    /// Transient.
    case cannotConnect(String)
    /// The connection closed before the response was complete. Transient.
    case connectionLost
    /// The client's own timeout passed (the engine's deadlines cancel the task instead). Transient.
    case timedOut
    /// The body is larger than the request's `maxBytes` (`limit`, in bytes), by its declared length
    /// or as it arrived.
    case tooLarge(limit: Int)
    /// A redirect to a scheme other than http or https; the value is its target.
    case redirectRefused(String)
    /// The response is not valid HTTP, or its content coding cannot be decoded; the value says
    /// which.
    case badResponse(String)
    /// Any other failure (TLS, too many redirects, a config header that would not expand), as a
    /// phrase shown as it is.
    case other(String)
    /// The address policy or a response bound refused the transfer; the text names the rule.
    case refused(String)

    /// Whether another attempt may succeed.
    public var isTransient: Bool {
        switch self {
        case .cannotResolveHost, .cannotConnect, .connectionLost, .timedOut: return true
        case .tooLarge, .redirectRefused, .badResponse, .other, .refused: return false
        }
    }

    public var description: String {
        switch self {
        case .cannotResolveHost(let host): return "could not resolve the host name '\(host)'"
        case .cannotConnect(let host): return "could not connect to \(host)"
        case .connectionLost: return "the connection was lost before the response was complete"
        case .timedOut: return "the HTTP client timed out"
        case .tooLarge(let limit): return "the payload is larger than maxBytes (\(limit) bytes); raise maxBytes in the job if so large a payload is expected"
        case .redirectRefused(let target): return "refused a redirect to '\(target)': only http and https are followed"
        case .badResponse(let what): return "the server's response was malformed: \(what)"
        case .other(let what): return what
        case .refused(let why): return why
        }
    }
}
