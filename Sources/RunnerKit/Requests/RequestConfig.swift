import Foundation

/// What shapes requests beyond the job itself: `--config FILE`, with `--rate`
/// and `--cacert` from the command line on top.
///
/// `hosts` are looked up by the host a request goes to: a host name matches itself, `*.suffix`
/// any name below the suffix; an exact name wins over a suffix, a longer suffix over a shorter one.
package struct RequestConfig: Sendable {
    /// Replaces `runner/<version>` as the User-Agent.
    package var userAgent: String?
    /// Folders of kind files, after those of `--kinds`.
    package var kinds: [String]
    /// Settings per host pattern, in the file's order.
    package var hosts: [(pattern: HostPattern, settings: HostSettings)]
    /// Requests per second to any one host without a `rate` of its own (`--rate`); nil: unpaced.
    package var rate: Double?
    /// A CA bundle trusted instead of the system's for hosts without a `cacert` of their own
    /// (`--cacert`).
    package var cacert: String?

    package init(
        userAgent: String? = nil, kinds: [String] = [], hosts: [(pattern: HostPattern, settings: HostSettings)] = [],
        rate: Double? = nil, cacert: String? = nil
    ) {
        self.userAgent = userAgent
        self.kinds = kinds
        self.hosts = hosts
        self.rate = rate
        self.cacert = cacert
    }

    /// The settings of the most specific entry that names `host` and `port`, if any: an exact
    /// name wins over a suffix, a longer suffix over a shorter one, and an entry bound to the
    /// port over one without a port (which covers every port). With no `port`, only entries
    /// without one (what counts per host: `rate`, `perHost`).
    package func settings(forHost host: String, port: Int? = nil) -> HostSettings? {
        entryIndex(forHost: host, port: port).map { hosts[$0].settings }
    }

    private func entryIndex(forHost host: String, port: Int?) -> Int? {
        guard !hosts.isEmpty else { return nil }
        var best: (index: Int, rank: Int)?
        for (index, (pattern, settings)) in hosts.enumerated() where pattern.matches(host: host, address: nil) {
            if let bound = settings.port, bound != port { continue }
            let rank: Int
            switch pattern {
            case .host: rank = Int.max / 2
            case .suffix(let suffix): rank = suffix.utf8.count
            case .network(_, let length): rank = 1000 + length
            }
            let ranked = rank * 2 + (settings.port == nil ? 0 : 1)
            if best == nil || ranked > best!.rank { best = (index, ranked) }
        }
        return best?.index
    }

    /// The entry of `hosts` a request to `url` takes its settings from, as the config writes it.
    package func entryName(for url: URL) -> String? {
        let origin = Origin(url)
        guard let index = entryIndex(forHost: origin.host, port: origin.port) else { return nil }
        return Self.written(hosts[index].pattern, port: hosts[index].settings.port)
    }

    /// The settings for a request to `url` (its host and port, the scheme's default if none).
    package func settings(for url: URL) -> HostSettings? {
        guard !hosts.isEmpty else { return nil }
        let origin = Origin(url)
        return settings(forHost: origin.host, port: origin.port)
    }

    /// The entries of `hosts` that name none of `contacted` (host names), as written in the
    /// config: for the warning that an entry (and its secrets) went unused.
    package func entries(namingNoneOf contacted: some Sequence<String>) -> [String] {
        let contacted = Array(contacted)
        return hosts.filter { entry in !contacted.contains { entry.pattern.matches(host: $0, address: nil) } }
            .map { Self.written($0.pattern, port: $0.settings.port) }
    }

    /// An entry as a config writes it: a single address without `/32`, an IPv6 address with a
    /// port in brackets.
    static func written(_ pattern: HostPattern, port: Int?) -> String {
        var text = pattern.description
        var isIPv6 = false
        if case .network(let address, let length) = pattern, length == (address.isIPv4 ? 32 : 128) {
            text = "\(address)"
            isIPv6 = !address.isIPv4
        }
        guard let port else { return text }
        return isIPv6 ? "[\(text)]:\(port)" : "\(text):\(port)"
    }

    /// Bytes a second of the transfers from `host` together (its entry's `limitRate`); nil: no cap of its own.
    package func limitRate(forHost host: String) -> Int? {
        settings(forHost: host)?.limitRate
    }

    /// Requests per second to `host`: its own `rate`, else `--rate`; nil when unpaced.
    package func rate(forHost host: String) -> Double? {
        settings(forHost: host)?.rate ?? rate
    }

    /// Whether any host sets TLS files or `--cacert` is given (a client must honour them).
    package var usesTLSFiles: Bool {
        cacert != nil || hosts.contains { $0.settings.cacert != nil || $0.settings.cert != nil || $0.settings.key != nil }
    }
}

/// The settings of one host pattern in the config's `hosts`.
package struct HostSettings: Sendable {
    /// The port the entry is bound to (`host:port`); nil: every port of the host.
    package var port: Int?
    /// Headers sent to this host only; values may hold secret references.
    package var headers: [HeaderTemplate]
    /// Requests per second to this host (token bucket); overrides `--rate`.
    package var rate: Double?
    /// Attempts talking to this host at once; overrides `--per-host`.
    package var perHost: Int?
    /// Bytes a second of every transfer from this host together, within `--limit-rate`.
    package var limitRate: Int?
    /// CA bundle (PEM) that verifies this host's certificate, instead of the system's.
    package var cacert: String?
    /// Client certificate (PEM) and its key, for hosts that ask for one.
    package var cert: String?
    package var key: String?

    package init(
        headers: [HeaderTemplate] = [], rate: Double? = nil, perHost: Int? = nil, cacert: String? = nil, cert: String? = nil,
        key: String? = nil, port: Int? = nil
    ) {
        self.port = port
        self.headers = headers
        self.rate = rate
        self.perHost = perHost
        self.cacert = cacert
        self.cert = cert
        self.key = key
    }
}
