import Foundation
import RunnerKit
import Synchronization

/// What `runner run` shows while jobs run and when they are done: `--json` lines as jobs end,
/// notices on stderr, a progress line on a terminal, and a table of results at the end.
final class RunReporter: RunObserver {
    private struct State {
        var finished = 0
        var topLevelFinished = 0
        var failed = 0
        var rows: [JobResult] = []
        var omittedRows = 0
        var lastDraw = ContinuousClock.now
        var progressShown = false
        /// Jobs between a failed attempt and their next one.
        var retrying: Set<String> = []
        /// Body bytes of the jobs that ended, and of those running as they last reported.
        var bytesDone = 0
        var bytesRunning: [String: Int] = [:]
    }

    private let json: Bool
    private let progress: Bool
    private let started = ContinuousClock.now
    private let state = Mutex(State())
    /// Rows kept for the closing table; beyond it, only jobs that did not succeed are kept.
    private let rowLimit = 60

    private let total: Int

    /// `total`: the top-level jobs expected (children are counted as they come).
    init(json: Bool, total: Int = 0) {
        self.json = json
        self.total = total
        self.progress = !json && Console.stdoutIsTerminal
    }

    func jobNotice(_ job: JobDescriptor, message: String) {
        clearProgress()
        Console.errLine("runner: \(job.key): \(message)")
    }

    /// A kind's program's stderr, as the runner has always shown it: `<key>: <line>`.
    func jobLog(_ job: JobDescriptor, line: String) {
        clearProgress()
        Console.errLine("\(job.key): \(line)")
    }

    func problem(_ message: String) {
        clearProgress()
        Console.errLine("runner: \(message)")
    }

    func jobRetrying(_ job: JobDescriptor, attempt: Int, after delay: Duration, reason: String) {
        _ = state.withLock { $0.retrying.insert(job.key) }
    }

    func jobProgress(_ job: JobDescriptor, bytes: Int, total: Int?) {
        let draw: String? = state.withLock { state in
            state.bytesRunning[job.key] = bytes
            return progressLine(&state)
        }
        if let draw { Console.outRaw(draw) }
    }

    func jobFinished(_ result: JobResult) {
        if json { Console.out(result.jsonLine) }
        let draw: String? = state.withLock { state in
            if let running = state.bytesRunning.removeValue(forKey: result.key) {
                state.bytesDone += result.transferred ?? result.bytes ?? running
            } else {
                state.bytesDone += result.transferred ?? result.bytes ?? 0
            }
            state.finished += 1
            if result.parent == nil { state.topLevelFinished += 1 }
            state.retrying.remove(result.key)
            if !result.status.isSuccess && !(result.parent != nil && result.status.isAcceptableForChild) { state.failed += 1 }
            if state.rows.count < rowLimit || !result.status.isSuccess && state.rows.count < 4 * rowLimit {
                state.rows.append(result)
            } else {
                state.omittedRows += 1
            }
            return progressLine(&state)
        }
        if let draw { Console.outRaw(draw) }
    }

    /// The progress line to draw now, if it is time for one (on a terminal, every 200 ms at most).
    private func progressLine(_ state: inout State) -> String? {
        guard progress, state.lastDraw.duration(to: .now) > .milliseconds(200) else { return nil }
        state.lastDraw = .now
        state.progressShown = true
        return "\r\u{1B}[K" + Self.progressLine(
            done: state.topLevelFinished, of: total, children: state.finished - state.topLevelFinished,
            failed: state.failed, retrying: state.retrying.count, elapsed: started.duration(to: .now),
            bytes: state.bytesDone + state.bytesRunning.values.reduce(0, +))
    }

    /// "  40 of 100 jobs done (+12 children), 1 not ok, 20 jobs/s, 12 MiB/s, about 3 s left". While
    /// jobs are retrying, no time is promised: the rate so far says nothing of their backoff.
    /// `bytes`: body bytes so far, ended and running jobs together (the bytes a second shown once
    /// there are 64 KiB of them).
    static func progressLine(
        done: Int, of total: Int, children: Int, failed: Int, retrying: Int, elapsed: Duration, bytes: Int = 0
    ) -> String {
        let rate = Double(done) / max(seconds(elapsed), 0.001)
        var line = "  \(done) of \(total) jobs done"
        if children > 0 { line += " (+\(children) children)" }
        line += ", \(failed) not ok, \(String(format: "%.0f", rate)) jobs/s"
        if bytes >= 64 * 1024 { line += ", " + Console.size(Int(Double(bytes) / max(seconds(elapsed), 0.001))) + "/s" }
        if retrying > 0 {
            line += ", \(retrying) retrying"
        } else if rate > 0, total > done {
            line += ", about \(clock(Double(total - done) / rate)) left"
        }
        return line
    }

    private func clearProgress() {
        let shown = state.withLock { state -> Bool in
            defer { state.progressShown = false }
            return state.progressShown
        }
        if shown { Console.outRaw("\r\u{1B}[K") }
    }

    /// The closing table and summary (not in `--json` mode), and a line when the per-host cap
    /// or pacing held jobs back noticeably (on stderr in `--json` mode). When pacing did, the
    /// per-host line is left out: a job holds its host's slot while it waits for a token, so the
    /// slots' waits are the rate's doing, and more slots would not help.
    func printSummary(
        _ summary: RunSummary, store: OutputStore, runLog: RunLog, hostWaits: HostLimiter.Waits? = nil,
        paceWaits: HostPacer.Waits? = nil
    ) {
        clearProgress()
        let paceLine = paceWaits.flatMap { $0.isNoticeable ? Self.describe($0) : nil }
        let hostLine = paceLine ?? hostWaits.flatMap { $0.isNoticeable ? Self.describe($0) : nil }
        let countsLine = summary.countsText + ". "
            + "Payloads and records in \(Self.relative(store.root))/, run log \(Self.relative(runLog.path))."
        // With --json, standard output holds records only; what a person reads goes to stderr,
        // where cron's mail and a terminal still show it.
        guard !json else {
            Console.err("runner: \(countsLine)")
            if let hostLine { Console.err("runner: \(hostLine)") }
            return
        }
        let (rows, omitted) = state.withLock { ($0.rows, $0.omittedRows) }
        Console.out(Self.table(rows))
        if omitted > 0 { Console.out("  … and \(omitted) more (every record is in \(Self.relative(store.root))/results)") }
        Console.out("\n" + countsLine)
        if rows.contains(where: \.stale) { Console.out("* stale: no new payload; output points at the last good payload.") }
        if rows.contains(where: { $0.waitedForHostMs > 0 }) {
            Console.out("MS is each job's own time; WAIT its time waiting for a slot or its turn at its host (--per-host, --rate).")
        }
        let slowest = summary.slowestFive.filter { $0.ownMs > 0 }
        if summary.total > 1, !slowest.isEmpty {
            Console.out("Slowest: " + slowest.map { "\(Self.shorten($0.key, 40)) \($0.ownMs) ms" }.joined(separator: ", "))
        }
        if let hostLine { Console.out(hostLine) }
    }

    /// The closing table: MS is a job's own time; WAIT (its waits for its host's slot and pace)
    /// and TRIES (its attempts) are columns only when some row has them.
    static func table(_ rows: [JobResult]) -> String {
        let waits = rows.contains { $0.waitedForHostMs > 0 }
        let tries = rows.contains { $0.attempts > 1 }
        var columns: [(title: String, width: Int, right: Bool, value: (JobResult) -> String)] = [
            ("STATUS", 12, false, { $0.status.rawValue + ($0.stale ? "*" : "") }),
            ("KEY", 44, false, { shorten($0.key, 44) }),
            ("HTTP", 5, true, { $0.httpStatus.map(String.init) ?? "-" }),
            ("BYTES", 9, true, { $0.bytes.map(String.init) ?? "-" }),
            ("MS", 6, true, { String($0.ownMs) }),
        ]
        if waits { columns.append(("WAIT", 6, true, { String($0.waitedForHostMs) })) }
        if tries { columns.append(("TRIES", 5, true, { String($0.attempts) })) }
        columns.append(("NOTE", 0, false, { note($0) }))
        func line(_ cells: [String]) -> String {
            var text = ""
            for (column, cell) in zip(columns, cells) {
                let cell = Printable.escaped(cell)
                let pad = String(repeating: " ", count: max(1, column.width - cell.count + 1) - (column.right ? 1 : 0))
                text += column.width == 0 ? cell : column.right ? pad + cell + " " : cell + pad
            }
            return text.trimmingCharacters(in: .whitespaces)
        }
        var lines = [line(columns.map(\.title))]
        for result in rows { lines.append(line(columns.map { $0.value(result) })) }
        return lines.joined(separator: "\n")
    }

    /// "Jobs waited 41 s in all for a per-host slot (most for 127.0.0.1), 95% of their time at
    /// hosts: --per-host 8 held them back; raise --per-host to run more at once."
    static func describe(_ waits: HostLimiter.Waits) -> String {
        let host = waits.busiestHost.map { " (most for \($0.isEmpty ? "a URL without host" : $0))" } ?? ""
        let waited = seconds(waits.waited)
        let amount = waited < 10 ? String(format: "%.1f s", waited) : clock(waited)
        let cap = waits.busiestHostLimit.map { "the config's perHost \($0) for that host held them back; raise it" }
            ?? "--per-host \(waits.limit) held them back; raise --per-host"
        return "Jobs waited \(amount) in all for a per-host slot\(host), "
            + "\(Int((waits.share * 100).rounded()))% of their time at hosts: \(cap) to run more at once."
    }

    /// "Jobs waited 12 s in all for their turn at a paced host (most for api.example.org, 2
    /// requests/s); 1 host asked to wait (Retry-After)."
    static func describe(_ waits: HostPacer.Waits) -> String {
        let host = waits.busiestHost.map { name in
            let rate = waits.busiestHostRate.map { ", \(String(format: "%g", $0)) requests/s" } ?? ""
            return " (most for \(name.isEmpty ? "a URL without host" : name)\(rate))"
        } ?? ""
        let waited = seconds(waits.waited)
        let amount = waited < 10 ? String(format: "%.1f s", waited) : clock(waited)
        let pauses = waits.pauses == 0 ? "" : "; hosts asked \(waits.pauses) time\(waits.pauses == 1 ? "" : "s") to wait (Retry-After)"
        return "Jobs waited \(amount) in all for their turn at a paced host\(host)\(pauses)."
    }

    private static func seconds(_ duration: Duration) -> Double { duration.inSeconds }

    private static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        return s < 60 ? "\(s) s" : s < 3600 ? "\(s / 60) min \(s % 60) s" : "\(s / 3600) h \(s % 3600 / 60) min"
    }

    // MARK: - Formatting

    static func note(_ result: JobResult) -> String {
        let said = plainNote(result)
        guard let kept = result.resumedFrom, kept > 0 else { return said }
        let resumed = "resumed from \(binarySize(kept))"
        return said.isEmpty ? resumed : resumed + "; " + said
    }

    /// 512 bytes, 3.5 KiB, 43.7 MiB, 1.2 GiB: one decimal, binary units.
    static func binarySize(_ bytes: Int) -> String {
        if bytes < 1024 { return "\(bytes) bytes" }
        let units = ["KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes) / 1024
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: "%.1f", value) + " " + units[unit]
    }

    private static func plainNote(_ result: JobResult) -> String {
        if let error = result.error { return error }
        return result.details.map { key, value in
            switch value {
            case .string(let s): return "\(key) \(s)"
            case .object(let members): return "\(key) " + members.map { "\($0.value.intValue ?? 0) \($0.key)" }.joined(separator: " ")
            default: return "\(key) \(JSONWriter.string(value))"
            }
        }.joined(separator: ", ")
    }

    static func shorten(_ text: String, _ width: Int) -> String {
        text.count <= width ? text : "…" + text.suffix(width - 1)
    }

    static func relative(_ path: String) -> String {
        let cwd = FileManager.default.currentDirectoryPath
        if path.hasPrefix(cwd + "/") { return String(path.dropFirst(cwd.count + 1)) }
        return path
    }
}
