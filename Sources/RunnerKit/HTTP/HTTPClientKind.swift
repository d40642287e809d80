import Foundation

/// An HTTP client that can tell how many transfers it has in flight.
package protocol HTTPClient: HTTPFetching {
    /// Transfers started and not yet wound down: zero when nothing is in flight.
    var activeTaskCount: Int { get }
}

extension URLSessionFetcher: HTTPClient {}
extension CurlFetcher: HTTPClient {}

/// The HTTP clients the runner can use: `urlsession` (FoundationNetworking) or `curl`
/// (libcurl's multi interface, loaded at run time).
package enum HTTPClientKind: String, Sendable, CaseIterable {
    case urlsession
    case curl

    /// The client used when nothing chooses one: `curl` (it costs about a third of
    /// URLSession's CPU per request), or `urlsession` where libcurl 7.68 or later cannot be loaded.
    package static var standard: HTTPClientKind {
        (try? CurlLibrary.shared.get()) != nil ? .curl : .urlsession
    }

    /// The client of that name.
    package static func named(_ name: String) throws(InvalidName) -> HTTPClientKind {
        guard let kind = HTTPClientKind(rawValue: name.lowercased()) else { throw InvalidName(name: name) }
        return kind
    }

    /// A new client of this kind; make one per process.
    /// - Throws: `CurlUnavailable` for `curl` when libcurl cannot be loaded.
    /// - Parameter policy: which addresses the client may connect to (see `AddressPolicy`).
    /// - Parameter requests: the User-Agent, headers and TLS files per host. URLSession on Linux
    ///   cannot be given a CA bundle or a client certificate: with TLS files, `urlsession` throws
    ///   `Unsupported` rather than verify with the system's CAs alone.
    package func make(
        maxConnectionsPerHost: Int, maxConnections: Int = 256, policy: AddressPolicy = .standard,
        requests: RequestConfig = RequestConfig()
    ) throws -> any HTTPClient {
        switch self {
        case .urlsession:
            if requests.usesTLSFiles {
                throw Unsupported(
                    description: "the urlsession HTTP client cannot use a CA bundle or client certificate (--cacert, or cacert, cert, key in the config); use --http curl")
            }
            return URLSessionFetcher(maxConnectionsPerHost: maxConnectionsPerHost, policy: policy, requests: requests)
        case .curl:
            return try CurlFetcher(maxConnectionsPerHost: maxConnectionsPerHost, maxConnections: maxConnections, policy: policy, requests: requests)
        }
    }

    /// An option this client cannot honour.
    package struct Unsupported: Error, Sendable, CustomStringConvertible {
        package var description: String
    }

    /// A name that is not one of the clients.
    package struct InvalidName: Error, Sendable, CustomStringConvertible {
        package var name: String
        package var description: String {
            "unknown HTTP client '\(name)': use \(HTTPClientKind.allCases.map(\.rawValue).joined(separator: " or "))"
        }
    }
}
