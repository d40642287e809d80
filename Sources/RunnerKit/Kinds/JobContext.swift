import Foundation
import Synchronization

/// Hears how the body of a running job comes along: at most once a second, while it moves.
public protocol TransferProgressObserving: Sendable {
    /// `bytes` of the body so far (kept bytes of a resume included), of `total` when the server said.
    func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?)
}

/// What a kind gets to run one attempt of one job: the job, the HTTP client and what came
/// before, behind a few calls that keep the engine's promises (bounded bodies, conditional
/// requests, no temporary file left behind).
public final class JobContext: Sendable {
    public let job: JobDescriptor
    /// The key's last good result whose payload is still on disk: the source of validators
    /// for a conditional request, and of the payload when the server says 304.
    public let previous: PreviousResult?
    let store: OutputStore
    private let http: any HTTPFetching
    /// The config's settings per host: for saying which entry's headers a refused request carried.
    let requests: RequestConfig
    private let accept: String?
    private let payloads = Mutex<[Payload]>([])
    /// What the attempt waits for now, as a deadline's message names it (nil: the fetch).
    private let waitingFor = Mutex<String?>(nil)
    private let received = Mutex<Validators?>(nil)
    /// `--limit-rate`, shared by every transfer.
    private let bandwidth: BandwidthLimit?
    /// Told how the body comes along, for a job that may take long.
    private let progress: (any TransferProgressObserving)?
    /// Hears the lines the kind logs (`log(_:)`).
    private let logLine: (@Sendable (String) -> Void)?

    init(
        job: JobDescriptor, store: OutputStore, http: any HTTPFetching, previous: PreviousResult?, accept: String?,
        requests: RequestConfig = RequestConfig(), bandwidth: BandwidthLimit? = nil, progress: (any TransferProgressObserving)? = nil,
        log: (@Sendable (String) -> Void)? = nil
    ) {
        self.job = job
        self.progress = progress
        self.logLine = log
        self.bandwidth = bandwidth
        self.store = store
        self.http = http
        self.requests = requests
        self.previous = previous
        self.accept = accept
    }

    /// Names what the attempt waits for from now on, for the message if the deadline ends it:
    /// `"the program did not answer"` becomes "the program did not answer within the deadline
    /// of 2 s". Nil: the fetch.
    public func waiting(for what: String?) { waitingFor.withLock { $0 = what } }

    /// Passes a line for people to read to the job's observers (`RunObserver.jobLog(_:line:)`),
    /// as an executable kind does with each line its program writes to stderr; `runner` prints
    /// it on stderr as `<key>: <line>`. Safe from any thread.
    public func log(_ line: String) {
        logLine?(line)
    }

    /// What the deadline's message says did not finish.
    var unfinished: String { waitingFor.withLock { $0 } ?? "the fetch did not finish" }

    /// The headers the runner would send with a request to the job's own URL, secrets
    /// expanded: the User-Agent, the kind's `Accept`, the config's headers for the URL's host
    /// and port, and the job's own (each replacing an earlier one of the same name). For a
    /// program that makes the request itself, or checks what was asked.
    public func requestHeaders() throws -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [("User-Agent", requests.userAgent ?? RunnerVersion.userAgent)]
        if let accept { headers.append(("Accept", accept)) }
        var originHeaders: [(name: String, value: String)] = []
        if let jobHeaders = job.headers {
            do {
                originHeaders = try jobHeaders.expanded(for: job.url)
            } catch {
                throw JobFailure(.failed, "field 'headers' \(error)")
            }
        }
        let request = HTTPRequest(url: job.url, headers: headers, originHeaders: originHeaders, maxBytes: job.maxBytes)
        do {
            return try requests.headers(of: request, hop: job.url, settings: requests.settings(for: job.url))
        } catch {
            throw JobFailure(.failed, "\(error)")
        }
    }

    /// The validators of the job's own URL as the server sent them in this attempt.
    var validators: Validators? { received.withLock { $0 } }

    /// A fetched response with a 2xx status, its body on its way to a temporary file.
    public struct Response: Sendable {
        public var head: HTTPResponseHead
        public var payload: Payload
    }

    /// What fetching the job's own URL gives: a body, or the server's word that the earlier
    /// payload is current.
    public enum Fetch: Sendable {
        case fetched(Response)
        /// A 304 to the conditional request: `previous` is current.
        case notModified(PreviousResult)
    }

    /// Fetches the job's URL conditionally, into a temporary file in the payload's folder
    /// (that of the job's `output` if set, else `folder`). `accept` replaces the kind's
    /// `Accept` header for this job (an image job that accepts only some formats names those).
    ///
    /// Throws `JobFailure`: `notFound` for 404 and 410, `failed` for any other status or
    /// transport error (transient for 408, 429, 5xx and connection errors). `inspect` looks at
    /// the body's first bytes as they arrive and may stop the transfer (`Payload.Inspector`).
    ///
    /// A large body cut on its way is kept and resumed by the next attempt (`PartialDownload`).
    public func fetch(folder: String, accept: String? = nil, inspect: Payload.Inspector? = nil) async throws -> Fetch {
        var headers: [(name: String, value: String)] = []
        let into = payloadFolder(default: folder)
        var partial: PartialDownload.Plan?
        if job.maxBytes >= PartialDownload.threshold {
            let download = PartialDownload(folder: into, key: job.key, url: job.url)
            // Read back off the concurrency pool's threads, and only when a sidecar is there.
            let loaded = download.hasSidecar(store: store) ? await PartialDownload.writer.run { [store] in download.load(store: store) } : .none
            switch loaded {
            case .kept(let kept): partial = (download, kept)
            case .none: partial = (download, nil)
            case .busy: partial = nil  // another attempt writes the key's partial: not this one
            }
        }
        // The kept partial's lock is let go of when this fetch is over, unless its file took it.
        defer { partial?.kept?.handle.close() }
        if let kept = partial?.kept {
            headers = kept.requestHeaders  // not conditional: the kept bytes are of the file as it is now, or a 200 comes
        } else if let validators = previous?.validators {
            headers.append(contentsOf: validators.conditionalHeaders)
        }
        let (head, payload): (HTTPResponseHead, Payload)
        do {
            (head, payload) = try await request(
                job.url, folder: into, headers: headers, accept: accept, inspect: inspect, partial: partial)
        } catch let failure as JobFailure where !failure.isTransient && partial?.kept != nil {
            partial?.download.remove(store: store)  // kept bytes of a file that cannot be had
            throw failure
        } catch let startOver as Payload.StartOver {
            // An answer to the range request that cannot be appended: once more, from the start.
            startedOver.withLock { $0 = startOver.description }
            partial?.download.removeSidecar(store: store)
            partial?.kept?.handle.close()  // so that the new partial may replace the old one
            (head, payload) = try await request(
                job.url, folder: into, headers: [], accept: accept, inspect: inspect, partial: partial.map { ($0.download, nil) })
        }
        if head.status == 304 {
            payload.discard()
            guard let previous else {
                throw JobFailure(.failed, "the server said 304 Not Modified, but there is no earlier payload of this key", httpStatus: 304)
            }
            return .notModified(previous)
        }
        received.withLock { $0 = Validators(headers: head.headers) }
        return .fetched(Response(head: head, payload: payload))
    }

    /// Fetches another URL (no conditional request) into a temporary file in `folder`.
    public func fetch(_ url: URL, folder: String) async throws -> Response {
        let (head, payload) = try await request(url, folder: payloadFolder(default: folder), headers: [])
        if head.status == 304 {
            payload.discard()
            throw JobFailure(.failed, Self.answered(304), httpStatus: 304)
        }
        return Response(head: head, payload: payload)
    }

    /// Why the bytes kept from an earlier attempt were not used, when an answer to the range
    /// request said so before its body (a 200 says so through its payload).
    private let startedOver = Mutex<String?>(nil)

    /// What the transfers of this attempt did: bytes received over the network (all of its
    /// fetches), bytes of the job's own payload kept from before, and why those kept were not
    /// used, if they were not.
    var transfer: (received: Int, resumedFrom: Int, startedOver: String?) {
        var total = (received: 0, resumedFrom: 0, startedOver: startedOver.withLock { $0 })
        for payload in payloads.withLock({ $0 }) {
            let transfer = payload.transfer
            total.received += transfer.received
            total.resumedFrom = max(total.resumedFrom, transfer.resumedFrom)
            total.startedOver = total.startedOver ?? transfer.startedOver
        }
        return total
    }

    /// `partial`: the body may be resumed (the job's own URL); a `StartOver` from the payload
    /// is thrown as it is, for the caller to ask again.
    private func request(
        _ url: URL, folder: String, headers conditional: [(name: String, value: String)], accept: String? = nil,
        inspect: Payload.Inspector? = nil, partial: PartialDownload.Plan? = nil
    ) async throws -> (HTTPResponseHead, Payload) {
        // The kind's Accept and the conditional headers go to every hop; the job's headers only
        // to the job's origin (replacing those of the same name); the client adds the
        // User-Agent and the config's headers per host.
        var headers = conditional
        if let accept = accept ?? self.accept { headers.append(("Accept", accept)) }
        var originHeaders: [(name: String, value: String)] = []
        if let jobHeaders = job.headers {
            do {
                originHeaders = try jobHeaders.expanded(for: url)
            } catch {
                throw JobFailure(.failed, "field 'headers' \(error)")
            }
        }
        let payload = Payload(
            store: store, folder: folder, maxBytes: job.maxBytes, inspector: inspect, partial: partial)
        payloads.withLock { $0.append(payload) }
        let head: HTTPResponseHead
        do {
            let request = HTTPRequest(url: url, headers: headers, originHeaders: originHeaders, maxBytes: job.maxBytes, bandwidth: bandwidth)
            let stalls = job.timeout > job.stall && job.lowSpeed > 0
            if stalls || (progress != nil && job.timeout > Self.progressAfter) {
                let http = self.http
                head = try await watching(payload, forStalls: stalls) { try await http.fetch(request, into: payload) }
            } else {
                head = try await http.fetch(request, into: payload)  // over before a stall or a progress report
            }
        } catch let startOver as Payload.StartOver {
            payload.discard()
            throw startOver
        } catch {
            await payload.keep()  // a cut body that may be resumed stays, for the next attempt
            throw JobFailure(classifying: error)
        }
        if let (count, total) = payload.cutShort {
            // A 206 whose body ended before its Content-Range said is a cut, never a payload.
            await payload.keep()
            throw JobFailure(
                .failed, "the server's 206 ended after byte \(count) of the \(total) its Content-Range announced (cut short)",
                httpStatus: head.status, isTransient: true, reason: .transport)
        }
        if var failure = Self.failure(forStatus: head) {
            if head.status == 401 || head.status == 403 {
                failure.message += refusalNote(head: head, sentJobHeaders: !originHeaders.isEmpty, body: payload.prefix)
            }
            payload.discard()
            throw failure
        }
        return (head, payload)
    }

    /// A job whose deadline is longer than this is told about to its observer (`progress`)
    /// while its body comes; a shorter one is over first.
    static let progressAfter = Duration.seconds(5)

    /// Runs `fetch`, telling `progress` how the body comes along once a second while it moves,
    /// and with `forStalls` failing it as `timedOut` ("stalled") once `payload` moved less than
    /// the job's `lowSpeed` bytes a second over its last `stall` (as curl's `--speed-limit` and
    /// `--speed-time` do); the caller asks for stalls only when the deadline is longer. Both
    /// are timed on the real clock: the network's, not the engine's schedule (a test clock that
    /// drives the engine's timers sees no sleeper of it).
    private func watching<T: Sendable>(_ payload: Payload, forStalls stalls: Bool, _ fetch: @escaping @Sendable () async throws -> T) async throws -> T {
        let (job, stall, lowSpeed, clock, progress) = (job, job.stall, job.lowSpeed, ContinuousClock(), progress)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await fetch() }
            group.addTask {
                let step = stalls ? min(Duration.seconds(1), stall / 4) : .seconds(1)
                var elapsed = Duration.zero
                // Bytes received at each step of the last `stall`, oldest first.
                var window: [(at: Duration, count: Int)] = [(.zero, 0)]
                var told = (at: Duration.zero, count: 0)
                while true {
                    try await clock.sleep(for: step)
                    elapsed += step
                    let count = payload.count
                    if let progress, count != told.count, elapsed - told.at >= .seconds(1) {
                        told = (elapsed, count)
                        progress.jobProgress(job, bytes: count, total: payload.total)
                    }
                    guard stalls else { continue }
                    window.append((elapsed, count))
                    window.removeAll { elapsed - $0.at > stall }
                    guard elapsed >= stall, let oldest = window.first else { continue }
                    let moved = count - oldest.count
                    if Double(moved) < Double(lowSpeed) * stall.inSeconds {
                        throw JobFailure(.timedOut, "stalled: \(moved) bytes in the last \(stall.secondsText) s", isTransient: true, reason: .stalled)
                    }
                }
            }
            while let result = try await group.next() {
                if let value = result {
                    group.cancelAll()
                    return value
                }
            }
            throw CancellationError()
        }
    }

    /// The bytes of the key's last good payload, for a kind that must re-read it after a 304.
    public func previousPayload() throws -> [UInt8] {
        guard let output = previous?.output, let bytes = OutputStore.readFile(in: AT_FDCWD, store.absolute(output)) else {
            throw JobFailure.failed("the server said not modified, but the earlier payload cannot be read")
        }
        return bytes
    }

    /// The folder the payload goes to: that of the job's `output` if set, else `folder`.
    func payloadFolder(default folder: String) -> String {
        job.output.map(OutputStore.folder(of:)) ?? folder
    }

    /// The payload path: the job's `output` if set, else `<folder>/<key without its kind>.<ext>`.
    func payloadPath(folder: String, fileExtension: String) -> String {
        if let output = job.output { return output }
        var stem = job.key
        let prefix = job.kindName + ":"
        if stem.hasPrefix(prefix) { stem.removeFirst(prefix.count) }
        return "\(folder)/\(OutputStore.fileName(forKey: stem)).\(fileExtension)"
    }

    /// Removes every temporary file of this attempt that was not committed.
    func discardLeftovers() {
        for payload in payloads.withLock({ $0 }) { payload.discard() }
    }

    // MARK: - Statuses

    /// The bytes of a refusal's body a note quotes.
    static let quotedBodyBytes = 200

    /// What follows "the server answered 401 Unauthorized": whose headers the request carried
    /// (the config's hosts entry for the URL that answered, or none; the job's own) and how the
    /// answer's body began, control characters replaced, so the note says more than the status.
    func refusalNote(head: HTTPResponseHead, sentJobHeaders: Bool, body: [UInt8]) -> String {
        let origin = Origin(head.url)
        let hostPort = origin.host.contains(":") ? "[\(origin.host)]:\(origin.port)" : "\(origin.host):\(origin.port)"
        var sources: [String] = []
        if let entry = requests.entryName(for: head.url), requests.settings(for: head.url)?.headers.isEmpty == false {
            sources.append("the config's hosts entry '\(entry)'")
        } else {
            sources.append("no config hosts entry for \(hostPort)")
        }
        if sentJobHeaders { sources.append("the job's own") }
        var note = "; headers from " + sources.joined(separator: " and ")
        let quoted = Self.printable(body.prefix(Self.quotedBodyBytes))
        if !quoted.isEmpty { note += "; the answer began: " + quoted + (body.count > Self.quotedBodyBytes ? "…" : "") }
        return note
    }

    /// Bytes as text for a message: UTF-8 (a cut character shows as �), every control character
    /// a space, and spaces at either end dropped.
    static func printable(_ bytes: some Collection<UInt8>) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        let scalars = text.unicodeScalars.map { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? " " : Character($0) }
        return String(scalars).trimmingCharacters(in: .whitespaces)
    }

    /// How a response status ends the job, or nil for a body to check (2xx) or a 304.
    static func failure(forStatus head: HTTPResponseHead) -> JobFailure? {
        let status = head.status
        switch status {
        case 200..<300, 304: return nil
        case 404, 410:
            return JobFailure(.notFound, answered(status), httpStatus: status)
        case 408, 429, 500..<600:
            return JobFailure(
                .failed, answered(status), httpStatus: status,
                isTransient: true, retryAfter: head.headers["retry-after"].flatMap(parseRetryAfter))
        default:
            return JobFailure(.failed, answered(status), httpStatus: status)
        }
    }

    static func parseRetryAfter(_ value: String) -> Duration? {
        if let seconds = Int(value.trimmingCharacters(in: .whitespaces)), seconds >= 0 { return .seconds(seconds) }
        return nil
    }

    static func answered(_ status: Int) -> String {
        let phrase = HTTPURLResponseReason.phrase(status)
        return "the server answered \(status)" + (phrase.isEmpty ? "" : " \(phrase)")
    }
}

/// Reason phrases for the statuses users meet most.
enum HTTPURLResponseReason {
    static func phrase(_ status: Int) -> String {
        switch status {
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 410: return "Gone"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 300..<400: return "(a redirect that was not followed)"
        default: return ""
        }
    }
}
