import Foundation
import Glibc
import Synchronization

/// The HTTP client on libcurl's multi interface: one multi handle per instance, driven by one
/// thread of its own, which reuses connections and caps them per host and in total.
///
/// libcurl is loaded at run time (see `CurlLibrary`). Bodies are decoded (gzip, deflate…)
/// and written to the caller's sink on the client's thread as they arrive. Like
/// `URLSessionFetcher`, this client sets no deadline of its own: the policy cancels the Swift
/// task, the caller is answered at once, and the transfer is removed right after.
///
/// The address policy is applied to the address each connection actually goes to: libcurl asks
/// this client to open every socket (`CURLOPT_OPENSOCKETFUNCTION`), which refuses a forbidden
/// address before anything is sent to it, and asks again before each request of a transfer, the
/// first and every redirect, on a new or a reused connection (`CURLOPT_PREREQFUNCTION`, libcurl
/// 7.80 or later), which is where a redirect from a public to a private address is caught.
/// Response headers are bounded (`HeaderBounds`).
///
/// Redirects are followed here, one transfer per hop, not by libcurl: each hop gets the headers
/// of its own origin (a request's `originHeaders` only on the request's origin, the config's
/// per-host headers by the hop's host) and the TLS files of its host. libcurl would send custom
/// headers such as `x-api-key` to every hop.
package final class CurlFetcher: HTTPFetching {
    private let multi: CurlMulti
    private let handles: EasyHandles
    private let policy: AddressPolicy
    private let requests: RequestConfig
    /// Whether the environment names a proxy libcurl will use (read once, as libcurl reads it
    /// per transfer from the same unchanging environment).
    private let proxied: Bool

    /// Redirects followed at most, as libcurl's own default for a browser-like client.
    static let maxRedirects = 20

    /// - Parameters:
    ///   - maxConnectionsPerHost: connections open to one host at once; more transfers wait.
    ///   - maxConnections: connections open at once in total, and kept open for reuse.
    ///   - policy: which addresses connections may go to.
    ///   - requests: the User-Agent, the headers and TLS files per host.
    /// - Throws: `CurlUnavailable` when libcurl (7.68 or later) cannot be loaded.
    package init(
        maxConnectionsPerHost: Int = 16, maxConnections: Int = 256, policy: AddressPolicy = .standard,
        requests: RequestConfig = RequestConfig()
    ) throws(CurlUnavailable) {
        let library = try CurlLibrary.shared.get()
        multi = try CurlMulti(library: library, perHost: max(1, maxConnectionsPerHost), total: max(1, maxConnections))
        handles = EasyHandles(library: library, keep: min(max(1, maxConnections), EasyHandles.defaultKeep))
        self.policy = policy
        self.requests = requests
        let environment = ProcessInfo.processInfo.environment
        proxied = ["http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"].contains { environment[$0]?.isEmpty == false }
    }

    deinit { multi.stop() }

    /// Transfers handed to libcurl and not yet removed from it: zero when nothing is in flight.
    package var activeTaskCount: Int { multi.activeCount }

    package func fetch(_ request: FetchRequest, into body: any BodySink) async throws -> FetchResponseHead {
        var hop = Hop(url: request.url, after: nil)
        for _ in 0...Self.maxRedirects {
            try Task.checkCancellation()
            // Through a proxy, the socket libcurl opens goes to the proxy, which would then reach
            // an address written in the URL for us: that address is judged here. (Without a
            // proxy, the open-socket callback judges it.)
            if proxied, let host = hop.url.host, let address = NetworkAddress(host),
                let refusal = policy.refusal(host: host, address: address, after: hop.after)
            {
                throw FetchError.refused(refusal.description)
            }
            let settings = requests.settings(for: hop.url)
            let headers = try requests.headers(of: request, hop: hop.url, settings: settings)
            let tls = TLSFiles(
                cacert: settings?.cacert ?? requests.cacert, cert: settings?.cert, key: settings?.key)
            let transfer = try CurlTransfer(
                hop: hop, headers: headers, userAgent: requests.userAgent ?? RunnerVersion.userAgent, tls: tls,
                maxBytes: request.maxBytes, bandwidth: request.bandwidth, sink: body, handles: handles, policy: policy)
            let head = try await perform(transfer)
            guard let next = transfer.redirectTarget else { return head }
            hop = Hop(url: next, after: transfer.lastAddress)
        }
        throw FetchError.other("too many redirects (more than \(Self.maxRedirects))")
    }

    /// Runs one transfer (one hop) to its end.
    private func perform(_ transfer: CurlTransfer) async throws -> FetchResponseHead {
        let multi = self.multi
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<FetchResponseHead, any Error>) in
                guard transfer.setContinuation(continuation) else { return }
                multi.submit(transfer)
            }
        } onCancel: {
            // Answer the caller at once; the client's thread removes the transfer next.
            transfer.finish(.failure(CancellationError()))
            multi.cancel(transfer)
        }
    }
}

// MARK: - The multi handle and its thread

/// One multi handle and the thread that drives it. Other threads only queue work in `inbox`
/// and wake the thread with `curl_multi_wakeup`; everything else happens on the thread.
private final class CurlMulti: @unchecked Sendable {
    let library: CurlLibrary
    private let handle: CurlLibrary.Handle

    private struct Inbox {
        var adds: [CurlTransfer] = []
        var cancels: [CurlTransfer] = []
        var stopping = false
        var isEmpty: Bool { adds.isEmpty && cancels.isEmpty && !stopping }
    }
    private let inbox = Mutex(Inbox())
    private let active = Atomic<Int>(0)
    /// Transfers in the multi handle, by easy handle; touched only on the thread.
    private var running: [CurlLibrary.Handle: CurlTransfer] = [:]
    /// Transfers their write callback paused for the bandwidth limit, each until its
    /// `pausedUntil`; touched only on the thread.
    private var paused: [CurlTransfer] = []

    /// The https origins with transfers in the multi handle: one setting up a connection (the
    /// transfers that came meanwhile held back), or how many run. A burst of transfers to an
    /// origin with none running starts with one; the others follow once its request is about to
    /// be sent, when the connection's protocol is known, so over HTTP/2 they multiplex on that one
    /// connection (as curl --parallel does) instead of each opening its own, and over HTTP/1.1
    /// they open theirs then. (libcurl's CURLOPT_PIPEWAIT would wait instead until a transfer
    /// ends: behind a slow first answer from an HTTP/1 server, every other transfer to it.) An
    /// origin is forgotten when its last transfer ends, so the next burst, whose connections may
    /// have closed meanwhile, starts with one again.
    private enum OriginState {
        case settingUp(held: [CurlTransfer])
        case running(Int)
    }
    private var origins: [String: OriginState] = [:]
    /// Origins whose first request is about to be sent: their held transfers start next.
    private var originsKnown: [String] = []

    init(library: CurlLibrary, perHost: Int, total: Int) throws(CurlUnavailable) {
        guard let handle = library.multiInit() else { throw CurlUnavailable(reason: "curl_multi_init failed") }
        self.library = library
        self.handle = handle
        _ = library.multiSetoptLong(handle, Curl.MultiOption.maxHostConnections, perHost)
        _ = library.multiSetoptLong(handle, Curl.MultiOption.maxTotalConnections, total)
        _ = library.multiSetoptLong(handle, Curl.MultiOption.maxConnects, total)
        let thread = Thread { [self] in run() }
        thread.name = "runner.curl"
        thread.start()
    }

    var activeCount: Int { active.load(ordering: .relaxed) }

    /// How long the thread waits for the network at most (ms) while transfers run. libcurl at
    /// times leaves a transfer's data where its poll does not see it (over HTTP/2 at the end of
    /// a batch: the last transfers waited out a whole second, once in 60 to 180 runs of 5000
    /// entries, with no socket becoming ready); looking again after this long bounds that wait,
    /// for a poll and a pass over the transfers ten times a second.
    static let pollWhileRunning: Int32 = 100

    func submit(_ transfer: CurlTransfer) {
        active.add(1, ordering: .relaxed)
        post { $0.adds.append(transfer) }
    }

    func cancel(_ transfer: CurlTransfer) {
        post { $0.cancels.append(transfer) }
    }

    func stop() {
        post { $0.stopping = true }
    }

    /// Queues work; wakes the thread only if the inbox was empty (else a wake-up is on its way).
    private func post(_ change: (inout Inbox) -> Void) {
        let wasEmpty = inbox.withLock { inbox in
            let wasEmpty = inbox.isEmpty
            change(&inbox)
            return wasEmpty
        }
        if wasEmpty { _ = library.multiWakeup(handle) }
    }

    private func run() {
        var adds: [CurlTransfer] = []
        var cancels: [CurlTransfer] = []
        var stillRunning: Int32 = 0
        var left: Int32 = 0
        while true {
            let stopping = inbox.withLock { inbox in
                swap(&adds, &inbox.adds)
                swap(&cancels, &inbox.cancels)
                return inbox.stopping
            }
            for transfer in adds { start(transfer) }
            for transfer in cancels { remove(transfer) }
            adds.removeAll(keepingCapacity: true)
            cancels.removeAll(keepingCapacity: true)
            if stopping { break }

            _ = library.multiPerform(handle, &stillRunning)
            while let message = library.multiInfoRead(handle, &left) {
                // struct CURLMsg { CURLMSG msg; CURL *easy_handle; union { void *; CURLcode result; } data; }
                guard message.load(as: Int32.self) == Curl.messageDone,
                      let easy = message.load(fromByteOffset: MemoryLayout<Int>.size, as: CurlLibrary.Handle?.self)
                else { continue }
                let code = message.load(fromByteOffset: 2 * MemoryLayout<Int>.size, as: Int32.self)
                guard let transfer = running.removeValue(forKey: easy) else { continue }
                if !paused.isEmpty { paused.removeAll { $0 === transfer } }
                _ = library.multiRemoveHandle(handle, easy)
                active.subtract(1, ordering: .relaxed)
                ended(transfer)
                transfer.complete(code)
            }
            if !originsKnown.isEmpty {
                let known = originsKnown
                originsKnown.removeAll()
                for origin in known { release(origin) }
                continue  // start them now, not after the poll
            }
            let wait = paused.isEmpty ? 1000 : resumePaused()
            _ = library.multiPoll(handle, nil, 0, running.isEmpty ? wait : min(wait, Self.pollWhileRunning), nil)
        }
        for (easy, transfer) in running {
            _ = library.multiRemoveHandle(handle, easy)
            transfer.finish(.failure(CancellationError()))
        }
        for case .settingUp(let held) in origins.values {
            for transfer in held { transfer.finish(.failure(CancellationError())) }
        }
        running.removeAll()
        origins.removeAll()
        _ = library.multiCleanup(handle)
    }

    /// The first transfer to `origin` is about to send its request (from its callback).
    func originKnown(_ origin: String) {
        originsKnown.append(origin)
    }

    /// Starts the transfers held for `origin`'s first connection.
    private func release(_ origin: String) {
        guard case .settingUp(let held)? = origins[origin] else { return }
        origins[origin] = .running(1)  // the one that set it up (`ended` counts it out)
        for transfer in held { start(transfer) }
    }

    /// A transfer left the multi handle: its origin counts one fewer, and is forgotten at none.
    private func ended(_ transfer: CurlTransfer) {
        guard let origin = transfer.multiplexOrigin else { return }
        if transfer.probesOrigin {
            // It ended before its request's moment was handled (or before sending at all): the
            // held ones go on their own.
            transfer.probesOrigin = false
            transfer.settingUpOrigin = nil
            if case .settingUp? = origins[origin] { release(origin) }
        }
        if case .running(let count)? = origins[origin] {
            origins[origin] = count > 1 ? .running(count - 1) : nil
        }
    }

    /// A transfer's write callback paused it (it is ahead of its bandwidth limit).
    func pause(_ transfer: CurlTransfer) {
        paused.append(transfer)
    }

    /// Goes on with the paused transfers whose time came; returns the milliseconds until the
    /// next one's (at most a second), for the poll's timeout.
    private func resumePaused() -> Int32 {
        let now = BandwidthLimit.now()
        let due = paused.filter { $0.pausedUntil <= now }
        if !due.isEmpty {
            paused.removeAll { $0.pausedUntil <= now }
            // Unpausing hands the held piece to the write callback at once, which may pause again.
            for transfer in due where running[transfer.easy] === transfer { _ = library.easyPause(transfer.easy, 0) }
        }
        guard let next = paused.map(\.pausedUntil).min() else { return 1000 }
        return Int32(min(1000, (next > now ? next - now : 0) / 1_000_000 + 1))
    }

    private func start(_ transfer: CurlTransfer) {
        guard !transfer.isFinished else {
            active.subtract(1, ordering: .relaxed)
            return
        }
        if let origin = transfer.multiplexOrigin {
            switch origins[origin] {
            case nil:
                origins[origin] = .settingUp(held: [])
                transfer.settingUpOrigin = origin  // the one that sets the connection up
                transfer.probesOrigin = true
            case .settingUp(var held)?:
                held.append(transfer)
                origins[origin] = .settingUp(held: held)
                return
            case .running(let count)?:
                origins[origin] = .running(count + 1)
            }
        }
        let code = library.multiAddHandle(handle, transfer.easy)
        guard code == 0 else {
            active.subtract(1, ordering: .relaxed)
            ended(transfer)
            transfer.finish(.failure(FetchError.other("libcurl refused the transfer (CURLMcode \(code))")))
            return
        }
        transfer.multi = self
        running[transfer.easy] = transfer
    }

    private func remove(_ transfer: CurlTransfer) {
        if let origin = transfer.multiplexOrigin, case .settingUp(var held)? = origins[origin],
            let index = held.firstIndex(where: { $0 === transfer })
        {
            held.remove(at: index)  // held back, never started
            origins[origin] = .settingUp(held: held)
            active.subtract(1, ordering: .relaxed)
            return
        }
        guard running.removeValue(forKey: transfer.easy) != nil else { return }
        if !paused.isEmpty { paused.removeAll { $0 === transfer } }
        _ = library.multiRemoveHandle(handle, transfer.easy)
        active.subtract(1, ordering: .relaxed)
        ended(transfer)
    }
}

/// One request of a fetch: the URL, and the address the hop before it went to (nil for the first).
struct Hop {
    var url: URL
    var after: NetworkAddress?
}

/// The TLS files of one host: the CA bundle to verify it with, the client certificate and key.
struct TLSFiles {
    var cacert: String?
    var cert: String?
    var key: String?
}

// MARK: - Easy handles

/// Easy handles kept for the next transfers, so that a handle's buffers and state are
/// allocated once rather than per request (`curl_easy_init` and `curl_easy_cleanup` were a
/// tenth of the client's work on small bodies). A handle is reset when it comes back, so no
/// option of one transfer outlives it; connections live in the multi handle, not here.
private final class EasyHandles: @unchecked Sendable {  // the list is behind a Mutex
    /// Handles kept at most; more in flight at once are made and freed as before.
    static let defaultKeep = 64

    let library: CurlLibrary
    private let keep: Int
    /// A handle as a number, which the Mutex may hold (a pointer is not Sendable).
    private let spare = Mutex<[UInt]>([])

    init(library: CurlLibrary, keep: Int) {
        self.library = library
        self.keep = keep
    }

    deinit {
        for easy in spare.withLock({ $0 }) { library.easyCleanup(OpaquePointer(bitPattern: easy)) }
    }

    /// A handle with libcurl's defaults: a kept one, else a new one.
    func take() -> CurlLibrary.Handle? {
        spare.withLock { $0.popLast() }.flatMap { OpaquePointer(bitPattern: $0) } ?? library.easyInit()
    }

    /// Takes back a handle that is in no multi handle any more.
    func giveBack(_ easy: CurlLibrary.Handle) {
        library.easyReset(easy)
        let kept = spare.withLock { spare in
            guard spare.count < keep else { return false }
            spare.append(UInt(bitPattern: easy))
            return true
        }
        if !kept { library.easyCleanup(easy) }
    }
}

// MARK: - One transfer

/// One GET on one easy handle. The continuation is resumed exactly once, by whoever finishes
/// first (the client's thread on completion, or the caller's cancellation); everything else
/// is touched only by libcurl's callbacks and `complete`, on the client's thread.
private final class CurlTransfer: RepliesOnce, @unchecked Sendable {
    let easy: CurlLibrary.Handle
    private let handles: EasyHandles
    private let library: CurlLibrary
    private let sink: any BodySink
    private let maxBytes: Int
    private let bandwidth: BandwidthLimit?
    /// The multi handle running this transfer, set when it starts (on the client's thread).
    fileprivate unowned(unsafe) var multi: CurlMulti?
    /// Until when (monotonic nanoseconds) the bandwidth limit holds this transfer paused.
    fileprivate var pausedUntil: UInt64 = 0
    /// "host:port" of an https URL, when libcurl says before each request that it is sent (the
    /// multi handle holds a burst to a new origin back until then); nil otherwise.
    fileprivate private(set) var multiplexOrigin: String?
    /// Set while this transfer sets up its origin's first connection, until its request is
    /// about to be sent (on the client's thread).
    fileprivate var settingUpOrigin: String?
    /// This transfer set up its origin's connection, and the multi handle may not have let the
    /// held ones go yet.
    fileprivate var probesOrigin = false
    private let url: URL
    /// The URL's host, read once: the policy asks for it before every request.
    private let host: String
    private let tls: TLSFiles
    private let policy: AddressPolicy
    private var headerList: UnsafeMutableRawPointer?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    let reply = OneShotReply()

    // The response so far, on the client's thread.
    private var status = 0
    private var headers: [String: String] = [:]
    /// Where the response redirects to, when it is a redirect to follow: read once the
    /// transfer is done.
    private(set) var redirectTarget: URL?
    /// The current header block ended with a redirect to follow: its body is not ours.
    private var redirecting = false
    /// The final response's headers are complete (later header lines are trailers).
    private var headersComplete = false
    /// Why this side aborted the transfer, when it did.
    private var abortReason: (any Error)?
    /// The address the last request went to: this hop's once it is sent, before that the
    /// previous hop's (for the policy's check of a redirect).
    private(set) var lastAddress: NetworkAddress?
    /// Header bytes and lines of the current response so far.
    private var headerBytes = 0
    private var headerLines = 0

    init(
        hop: Hop, headers: [(name: String, value: String)], userAgent: String, tls: TLSFiles, maxBytes: Int,
        bandwidth: BandwidthLimit?, sink: any BodySink, handles: EasyHandles, policy: AddressPolicy
    ) throws(FetchError) {
        guard let easy = handles.take() else { throw FetchError.other("curl_easy_init failed") }
        self.bandwidth = bandwidth
        self.easy = easy
        self.handles = handles
        self.library = handles.library
        self.sink = sink
        self.maxBytes = maxBytes
        self.url = hop.url
        self.host = hop.url.host ?? ""
        self.lastAddress = hop.after
        self.tls = tls
        self.policy = policy
        errorBuffer = .allocate(capacity: Curl.errorSize)
        errorBuffer.initialize(repeating: 0, count: Curl.errorSize)

        let me = Unmanaged.passUnretained(self).toOpaque()
        setString(Curl.Option.url, hop.url.absoluteString)
        setLong(Curl.Option.noSignal, 1)
        // Reads of up to 100 KiB, as the curl tool makes them: a large body takes a sixth of the
        // system calls and callbacks of libcurl's default 16 KiB.
        setLong(Curl.Option.bufferSize, 100 * 1024)
        // Not CURLOPT_PIPEWAIT: the multi handle holds a first burst to an https origin itself
        // (`CurlMulti`'s origins). libcurl parks the transfers PIPEWAIT holds until one ends, so
        // behind a slow first answer from an HTTP/1 server every other transfer to it would wait
        // too (measured here: a 2 s stall held a moving body; curl issue 15838).
        // Redirects are followed by the fetcher, hop by hop (libcurl's default is not to).
        if "http,https".withCString({ library.easySetoptPointer(easy, Curl.Option.protocolsString, $0) }) != Curl.Code.ok {
            setLong(Curl.Option.protocols, Curl.protocolHTTP | Curl.protocolHTTPS)
        }
        setString(Curl.Option.acceptEncoding, "")  // every coding libcurl can decode
        setString(Curl.Option.userAgent, userAgent)
        if let cacert = tls.cacert {
            // This bundle instead of the system's: no directory of system certificates besides.
            setString(Curl.Option.caInfo, cacert)
            _ = library.easySetoptPointer(easy, Curl.Option.caPath, nil)
        }
        if let cert = tls.cert { setString(Curl.Option.sslCert, cert) }
        if let key = tls.key { setString(Curl.Option.sslKey, key) }
        setLong(Curl.Option.tcpKeepAlive, 1)
        // The runner enforces its own deadlines; this only stops a transfer stalled for an hour.
        setLong(Curl.Option.lowSpeedLimit, 1)
        setLong(Curl.Option.lowSpeedTime, 3600)
        _ = library.easySetoptPointer(easy, Curl.Option.errorBuffer, errorBuffer)
        _ = library.easySetoptPointer(easy, Curl.Option.writeFunction, unsafeBitCast(curlWriteCallback, to: UnsafeRawPointer.self))
        _ = library.easySetoptPointer(easy, Curl.Option.writeData, me)
        _ = library.easySetoptPointer(easy, Curl.Option.headerFunction, unsafeBitCast(curlHeaderCallback, to: UnsafeRawPointer.self))
        _ = library.easySetoptPointer(easy, Curl.Option.headerData, me)
        _ = library.easySetoptPointer(easy, Curl.Option.openSocketFunction, unsafeBitCast(curlOpenSocketCallback, to: UnsafeRawPointer.self))
        _ = library.easySetoptPointer(easy, Curl.Option.openSocketData, me)
        // Before 7.80 only new connections are checked (a reused one was checked when opened).
        if library.easySetoptPointer(easy, Curl.Option.prereqFunction, unsafeBitCast(curlPrereqCallback, to: UnsafeRawPointer.self)) == Curl.Code.ok {
            _ = library.easySetoptPointer(easy, Curl.Option.prereqData, me)
            if hop.url.scheme?.lowercased() == "https" { multiplexOrigin = host + ":" + String(hop.url.port ?? 443) }
        }
        if !headers.isEmpty {
            for header in headers {
                headerList = "\(header.name): \(header.value)".withCString { library.slistAppend(headerList, $0) }
            }
            _ = library.easySetoptPointer(easy, Curl.Option.httpHeader, headerList)
        }
    }

    /// Runs once the multi handle let go of the transfer (it holds the transfer until then).
    deinit {
        handles.giveBack(easy)
        library.slistFreeAll(headerList)
        errorBuffer.deallocate()
    }

    private func setLong(_ option: Int32, _ value: Int) {
        _ = library.easySetoptLong(easy, option, value)
    }

    /// libcurl copies the strings it is given. Through `withCString`: a `String` handed to C
    /// as it is becomes a copy on the heap first, at every call.
    private func setString(_ option: Int32, _ value: String) {
        _ = value.withCString { library.easySetoptPointer(easy, option, $0) }
    }

    // MARK: Finishing

    /// libcurl is done with the transfer (it was removed from the multi handle).
    func complete(_ code: Int32) {
        if let abortReason {
            finish(.failure(abortReason))
        } else if code == Curl.Code.ok {
            if status >= 200 {
                finish(.success(FetchResponseHead(status: status, headers: headers, url: url)))
            } else {
                finish(.failure(FetchError.badResponse("no HTTP response")))
            }
        } else {
            finish(.failure(translate(code)))
        }
    }

    private func translate(_ code: Int32) -> any Error {
        let host = self.host.isEmpty ? "the server" : self.host
        switch code {
        case Curl.Code.couldNotResolveHost: return FetchError.cannotResolveHost(host)
        case Curl.Code.couldNotConnect, Curl.Code.couldNotResolveProxy:
            return FetchError.cannotConnect(url.port.map { "\(host):\($0)" } ?? host)
        case Curl.Code.partialFile, Curl.Code.recvError, Curl.Code.sendError, Curl.Code.gotNothing:
            return FetchError.connectionLost
        case Curl.Code.operationTimedOut: return FetchError.timedOut
        case Curl.Code.weirdServerReply, Curl.Code.badContentEncoding, Curl.Code.http2, Curl.Code.http2Stream:
            return FetchError.badResponse(message(code))
        case Curl.Code.tooManyRedirects: return FetchError.other("too many redirects")
        case Curl.Code.unsupportedProtocol: return FetchError.redirectRefused(url.absoluteString)
        case Curl.Code.peerFailedVerification, Curl.Code.sslConnectError:
            let hint = tls.cacert == nil ? "; if it is signed by a private CA, pass --cacert or set cacert for the host in the config" : ""
            return FetchError.other("TLS with \(host) failed: \(message(code))\(hint)")
        case Curl.Code.sslCertProblem, Curl.Code.sslCACertBadFile:
            return FetchError.other("TLS with \(host) failed: \(message(code)) (check the cacert, cert and key files)")
        default: return FetchError.other("HTTP transfer failed: \(message(code)) (curl error \(code))")
        }
    }

    /// libcurl's message for the failure: the detailed one when it wrote one.
    private func message(_ code: Int32) -> String {
        errorBuffer.pointee != 0 ? String(cString: errorBuffer) : library.describe(code)
    }

    // MARK: Callbacks (on the client's thread)

    /// libcurl is about to open a socket to `address`: the policy may refuse (nothing is sent).
    fileprivate func mayConnect(to address: NetworkAddress) -> Bool {
        guard abortReason == nil, !isFinished else { return false }
        if let refusal = policy.refusal(host: host, address: address, after: lastAddress) {
            abortReason = FetchError.refused(refusal.description)
            return false
        }
        return true
    }

    /// A request is about to be sent on a connection (new or reused) to `address`.
    fileprivate func maySend(to address: NetworkAddress?) -> Bool {
        guard abortReason == nil, !isFinished else { return false }
        guard let address else {
            abortReason = FetchError.refused("refused the request: libcurl did not say which address it goes to")
            return false
        }
        if let refusal = policy.refusal(host: host, address: address, after: lastAddress) {
            abortReason = FetchError.refused(refusal.description)
            return false
        }
        lastAddress = address
        if let origin = settingUpOrigin {
            // The connection is up and its protocol known: the transfers held for it may follow.
            settingUpOrigin = nil
            multi?.originKnown(origin)
        }
        return true
    }

    /// A piece of the body (decoded); returning fewer bytes than given aborts the transfer.
    fileprivate func received(body bytes: UnsafeRawBufferPointer) -> Int {
        if redirecting { return bytes.count }
        guard abortReason == nil, !isFinished else { return 0 }
        if let bandwidth {
            // Ahead of the limit: libcurl holds this piece and hands it over again once the
            // multi handle's thread unpauses the transfer; the other transfers go on meanwhile.
            let wait = bandwidth.delay()
            if wait > 0, let multi {
                pausedUntil = BandwidthLimit.now() + wait
                multi.pause(self)
                return Curl.writePause
            }
            bandwidth.charge(bytes.count)
        }
        do {
            try sink.write(bytes)
        } catch {
            abortReason = error
            return 0
        }
        return bytes.count
    }

    /// One header line, with its line ending; an empty line ends a header block.
    fileprivate func received(header line: UnsafeRawBufferPointer) -> Int {
        var end = line.count
        while end > 0, line[end - 1] == UInt8(ascii: "\n") || line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        let text = UnsafeRawBufferPointer(rebasing: line[..<end])
        if text.starts(with: Self.statusPrefix) {
            // A new response: the first, the next after a redirect or an interim 1xx (whose
            // headers count towards the bound of the response they precede).
            if redirecting {
                headerBytes = 0
                headerLines = 0
            }
        }
        headerBytes += line.count
        headerLines += 1
        if let excess = HeaderBounds.excess(bytes: headerBytes, lines: headerLines) {
            abortReason = FetchError.refused(excess)
            return 0
        }
        if text.starts(with: Self.statusPrefix) {
            status = Self.statusCode(text)
            headers.removeAll(keepingCapacity: true)
            redirectTarget = nil
            redirecting = false
            headersComplete = false
            return line.count
        }
        if headersComplete || redirecting { return line.count }
        if text.isEmpty {
            return endOfHeaders() ? line.count : 0
        }
        guard let colon = text.firstIndex(of: UInt8(ascii: ":")) else { return line.count }
        // Lower-cased as it is made: one string, not one and then its lower-case copy.
        let name = String(unsafeUninitializedCapacity: colon) { out in
            for index in 0..<colon {
                let byte = text[index]
                out[index] = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte | 0x20 : byte
            }
            return colon
        }
        var start = colon + 1
        var stop = text.count
        while start < stop, text[start] == UInt8(ascii: " ") || text[start] == UInt8(ascii: "\t") { start += 1 }
        while stop > start, text[stop - 1] == UInt8(ascii: " ") || text[stop - 1] == UInt8(ascii: "\t") { stop -= 1 }
        let value = String(decoding: UnsafeRawBufferPointer(rebasing: text[start..<stop]), as: UTF8.self)
        if headers.isEmpty { headers.reserveCapacity(16) }  // grown once, not at every doubling
        if let earlier = headers[name] {
            headers[name] = earlier + ", " + value
        } else {
            headers[name] = value
        }
        return line.count
    }

    /// Decides at the end of a header block, before any of its body is read; false aborts.
    private func endOfHeaders() -> Bool {
        if status < 200 { return true }  // interim response; the real one follows
        if Self.followedStatuses.contains(status), let location = headers["location"] {
            let target = URL(string: location, relativeTo: url)?.absoluteURL
            let scheme = target?.scheme?.lowercased()
            guard let target, scheme == "http" || scheme == "https" else {
                abortReason = FetchError.redirectRefused(target?.absoluteString ?? location)
                return false
            }
            if let refusal = policy.refusal(redirectFrom: url, to: target) {
                abortReason = FetchError.refused(refusal.description)
                return false
            }
            redirectTarget = target
            redirecting = true
            return true
        }
        headersComplete = true
        if (200..<300).contains(status), let length = headers["content-length"].flatMap({ Int($0) }), length > maxBytes {
            abortReason = FetchError.tooLarge(limit: maxBytes)
            return false
        }
        do {
            try sink.begin(status: status, headers: headers)
        } catch {
            abortReason = error
            return false
        }
        return true
    }

    /// The statuses followed when the response names a `Location` (libcurl's set).
    private static let followedStatuses: Set<Int> = [300, 301, 302, 303, 307, 308]
    private static let statusPrefix = Array("HTTP/".utf8)

    /// The number after the protocol in "HTTP/1.1 200 OK" or "HTTP/2 404".
    private static func statusCode(_ line: UnsafeRawBufferPointer) -> Int {
        guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { return 0 }
        var code = 0
        var index = space + 1
        while index < line.count, index < space + 4, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(line[index]) {
            code = code * 10 + Int(line[index] - UInt8(ascii: "0"))
            index += 1
        }
        return code
    }
}

/// libcurl's write callback: `size_t (char *data, size_t size, size_t count, void *userdata)`.
private let curlWriteCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, user in
    guard let user else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(user).takeUnretainedValue()
    return transfer.received(body: UnsafeRawBufferPointer(start: data, count: size * count))
}

/// libcurl's header callback, one whole header line per call.
private let curlHeaderCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, user in
    guard let user else { return 0 }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(user).takeUnretainedValue()
    return transfer.received(header: UnsafeRawBufferPointer(start: data, count: size * count))
}

/// libcurl's open-socket callback: `curl_socket_t (void *clientp, curlsocktype purpose,
/// struct curl_sockaddr *address)`, where `struct curl_sockaddr { int family; int socktype;
/// int protocol; unsigned int addrlen; struct sockaddr addr; }`. Answers a new socket, or
/// CURL_SOCKET_BAD to refuse the address (libcurl then fails with "could not connect").
private let curlOpenSocketCallback: @convention(c) (UnsafeMutableRawPointer?, Int32, UnsafeMutableRawPointer?) -> Int32 = { user, purpose, address in
    guard let user, let address else { return Curl.socketBad }
    let family = address.load(as: Int32.self)
    let type = address.load(fromByteOffset: 4, as: Int32.self)
    let proto = address.load(fromByteOffset: 8, as: Int32.self)
    if purpose == Curl.socketTypeConnection {
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(user).takeUnretainedValue()
        guard let ip = NetworkAddress(sockaddr: UnsafeRawPointer(address + 16)), transfer.mayConnect(to: ip) else {
            return Curl.socketBad
        }
    }
    return socket(family, type | Int32(SOCK_CLOEXEC.rawValue), proto)
}

/// libcurl's pre-request callback: `int (void *clientp, char *conn_primary_ip, char
/// *conn_local_ip, int conn_primary_port, int conn_local_port)`.
private let curlPrereqCallback: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutablePointer<CChar>?, UnsafeMutablePointer<CChar>?, Int32, Int32) -> Int32 = { user, primary, _, _, _ in
    guard let user else { return Curl.prereqAbort }
    let transfer = Unmanaged<CurlTransfer>.fromOpaque(user).takeUnretainedValue()
    let address = primary.flatMap { NetworkAddress(String(cString: $0)) }
    return transfer.maySend(to: address) ? Curl.prereqOK : Curl.prereqAbort
}
