/// Everything that shapes an engine, the same for a one-shot run and a watcher: parsed once by
/// the command line (or set by a host program), turned into an engine by `EngineAssembly`.
public struct EngineOptions: Sendable {
    /// The output directory.
    public var out: String
    /// Jobs running at once, children included.
    public var concurrency: Int
    /// Attempts talking to one host at once.
    public var perHost: Int
    /// The HTTP client.
    public var http: HTTPClientKind
    /// Which addresses jobs, children and redirects may reach.
    public var policy: AddressPolicy
    /// What a job may ask (a job asking more is invalid).
    public var limits: JobLimits
    /// Headers, pacing and TLS per host: the config file, `--rate` and `--cacert`.
    public var requests: RequestConfig

    public static let defaultConcurrency = 8

    public init(
        out: String = "out", concurrency: Int = defaultConcurrency, perHost: Int = JobEngine.Configuration.defaultPerHost,
        http: HTTPClientKind = .standard, policy: AddressPolicy = .standard, limits: JobLimits = .none,
        requests: RequestConfig = RequestConfig()
    ) {
        self.requests = requests
        self.policy = policy
        self.limits = limits
        self.out = out
        self.concurrency = concurrency
        self.perHost = perHost
        self.http = http
    }
}
