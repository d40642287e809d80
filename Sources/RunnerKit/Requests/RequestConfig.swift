import Foundation

/// What shapes requests beyond the job itself: `--config FILE`, with `--rate`
/// and `--cacert` from the command line on top.
///
/// `hosts` are looked up by the host a request goes to: a host name matches itself, `*.suffix`
/// any name below the suffix; an exact name wins over a suffix, a longer suffix over a shorter one.
public struct RequestConfig: Sendable {
    /// Replaces `runner/<version>` as the User-Agent.
    public var userAgent: String?
    /// Folders of kind files, after those of `--kinds`.
    public var kinds: [String]
    /// Settings per host pattern, in the file's order.
    public var hosts: [(pattern: HostPattern, settings: HostSettings)]
    /// Requests per second to any one host without a `rate` of its own (`--rate`); nil: unpaced.
    public var rate: Double?
    /// A CA bundle trusted instead of the system's for hosts without a `cacert` of their own
    /// (`--cacert`).
    public var cacert: String?

    public init(
        userAgent: String? = nil, kinds: [String] = [], hosts: [(pattern: HostPattern, settings: HostSettings)] = [],
        rate: Double? = nil, cacert: String? = nil
    ) {
        self.userAgent = userAgent
        self.kinds = kinds
        self.hosts = hosts
        self.rate = rate
        self.cacert = cacert
    }

    /// The settings of the most specific pattern that names `host`, if any.
    public func settings(forHost host: String) -> HostSettings? {
        guard !hosts.isEmpty else { return nil }
        var best: (settings: HostSettings, rank: Int)?
        for (pattern, settings) in hosts where pattern.matches(host: host, address: nil) {
            let rank: Int
            switch pattern {
            case .host: rank = Int.max
            case .suffix(let suffix): rank = suffix.utf8.count
            case .network(_, let length): rank = 1000 + length
            }
            if best == nil || rank > best!.rank { best = (settings, rank) }
        }
        return best?.settings
    }

    /// Requests per second to `host`: its own `rate`, else `--rate`; nil when unpaced.
    public func rate(forHost host: String) -> Double? {
        settings(forHost: host)?.rate ?? rate
    }

    /// Whether any host sets TLS files or `--cacert` is given (a client must honour them).
    public var usesTLSFiles: Bool {
        cacert != nil || hosts.contains { $0.settings.cacert != nil || $0.settings.cert != nil || $0.settings.key != nil }
    }
}

/// The settings of one host pattern in the config's `hosts`.
public struct HostSettings: Sendable {
    /// Headers sent to this host only; values may hold secret references.
    public var headers: [HeaderTemplate]
    /// Requests per second to this host (token bucket); overrides `--rate`.
    public var rate: Double?
    /// Attempts talking to this host at once; overrides `--per-host`.
    public var perHost: Int?
    /// CA bundle (PEM) that verifies this host's certificate, instead of the system's.
    public var cacert: String?
    /// Client certificate (PEM) and its key, for hosts that ask for one.
    public var cert: String?
    public var key: String?

    public init(
        headers: [HeaderTemplate] = [], rate: Double? = nil, perHost: Int? = nil, cacert: String? = nil, cert: String? = nil,
        key: String? = nil
    ) {
        self.headers = headers
        self.rate = rate
        self.perHost = perHost
        self.cacert = cacert
        self.cert = cert
        self.key = key
    }
}
