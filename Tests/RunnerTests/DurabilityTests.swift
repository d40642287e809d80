import Foundation
import RunnerTestSupport
import Glibc
import RunnerKit
import Testing

/// What the runner reports as done is on disk, in the order a crash cannot break: the system
/// calls traced with strace (as ALICE, OSDI 2014, finds crash bugs in real applications), an
/// fsync of the file before its rename, of the folder after it, a syncfs before done/.
@Suite(.startsProcesses, .timeLimit(.minutes(3)), .enabled(if: Trace.strace != nil, "strace is not installed"))
struct DurabilityTests {
    @Test func submitFsyncsTheFileRenamesItFsyncsTheInboxAndOnlyThenSaysQueued() async throws {
        let s = try SpoolWorld()
        let job = s.w.write("job.json", s.imageJob("image:durable"))
        let trace = try await Trace.run(["submit", job, "--spool", s.spool.root], in: s.w)
        #expect(trace.status == 0)
        let calls = trace.calls

        let inbox = try #require(calls.firstIndex { $0.name == "openat" && $0.text.contains("\"\(s.spool.inbox)\"") && $0.text.contains("O_DIRECTORY") })
        let inboxFD = try #require(calls[inbox].result)
        let create = try #require(calls.firstIndex { $0.name == "openat" && $0.text.contains(".tmp-") && $0.text.contains("O_CREAT") })
        let fileFD = try #require(calls[create].result)
        let syncFile = try #require(calls.firstIndex { $0.name == "fsync" && $0.firstArgument == fileFD })
        let rename = try #require(calls.firstIndex { $0.name.hasPrefix("rename") && $0.text.contains(".tmp-") && $0.text.contains("\(s.spool.inbox)/job.json\"") })
        let syncInbox = try #require(calls.lastIndex { $0.name == "fsync" && $0.firstArgument == inboxFD })
        let said = try #require(calls.firstIndex { $0.name == "write" && $0.firstArgument == 1 && $0.text.contains("queued") })
        #expect(create < syncFile, "\(trace.text)")
        #expect(syncFile < rename, "the data is on disk before the name: \(trace.text)")
        #expect(rename < syncInbox, "the inbox is fsync'ed after the rename: \(trace.text)")
        #expect(syncInbox < said, "and only then is it reported: \(trace.text)")
        #expect(inbox < syncInbox)
    }

    @Test func runSyncsWhatItWroteBeforeItExitsUnlessToldNot() async throws {
        let s = try SpoolWorld()
        let jobs = s.w.write("jobs.jsonl", (0..<5).map { s.imageJob("image:run-\($0)") }.joined(separator: "\n"))
        let trace = try await Trace.run(["run", jobs, "--out", s.w.out], in: s.w)
        #expect(trace.status == 0, "\(trace.text)")
        let calls = trace.calls
        let lastRename = try #require(calls.lastIndex { $0.name.hasPrefix("rename") })
        let syncfs = try #require(calls.lastIndex { $0.name == "syncfs" }, "\(trace.text)")
        #expect(lastRename < syncfs, "every record and payload is renamed before the syncfs: \(trace.text)")
        #expect(calls[syncfs...].allSatisfy { !$0.name.hasPrefix("rename") })

        let scratch = try await Trace.run(["run", jobs, "--out", s.w.out + "2", "--no-sync"], in: s.w)
        #expect(scratch.status == 0)
        #expect(!scratch.calls.contains { $0.name == "syncfs" }, "--no-sync skips it")
    }

    /// `run` holds its output alone, so it reads which records exist once: a key's first run looks
    /// for no record file (no failing openat per job), a key seen before has its record read.
    @Test func runLooksForNoRecordOfAKeyItHasNeverRun() async throws {
        let s = try SpoolWorld()
        let jobs = s.w.write("jobs.jsonl", (0..<6).map { s.imageJob("image:first-\($0)") }.joined(separator: "\n"))
        let first = try await Trace.run(["run", jobs, "--out", s.w.out], in: s.w)
        #expect(first.status == 0, "\(first.text)")
        let missing = first.calls.filter { $0.name == "openat" && $0.text.contains("ENOENT") && $0.text.contains(".json\"") }
        #expect(missing.isEmpty, "no record was looked for: \(missing.map(\.text))")

        // Again: each record is read, and the run is conditional (notModified).
        let second = try await Trace.run(["run", jobs, "--out", s.w.out], in: s.w)
        #expect(second.status == 0)
        let read = second.calls.filter { $0.name == "openat" && $0.text.contains("image_first-") && $0.text.contains(".json\"") && !$0.text.contains("O_CREAT") && !$0.text.contains("ENOENT") }
        #expect(read.count == 6, "\(second.text)")
        #expect(try s.w.status("image:first-0") == "notModified")

        // A key whose record appeared during the run (its first job wrote it) is read for its second job.
        let twice = s.w.write("twice.jsonl", [s.imageJob("image:twice"), s.imageJob("image:twice")].joined(separator: "\n"))
        let third = try await Trace.run(["run", twice, "--out", s.w.out + "-twice", "--concurrency", "1"], in: s.w)
        #expect(third.status == 0, "\(third.text)")
        let statuses = try String(contentsOfFile: "\(s.w.out)-twice/runs/" + FileManager.default.contentsOfDirectory(atPath: "\(s.w.out)-twice/runs").sorted().last!, encoding: .utf8)
        #expect(statuses.contains("\"notModified\""), "the second job of the key was conditional: \(statuses)")
    }

    @Test func aFileReachesDoneOnlyAfterItsPayloadsAndRecordsAreOnDisk() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let tracePath = "\(s.w.root)/watch.trace"
        let strace = try ChildProcess(
            Trace.strace!,
            ["-f", "-s", "512", "-o", tracePath, "-e", "trace=\(Trace.syscalls)", RunnerBinary.path, "watch", "--spool", s.spool.root, "--out", s.w.out],
            stdout: .null, stderr: .null)
        defer { strace.terminate() }
        // The watcher's pid starts the name of its folder under active/.
        #expect(await s.wait(upTo: .seconds(20)) { !s.names(s.spool.active).isEmpty })
        let pid = try #require(s.names(s.spool.active).first.flatMap { Int32($0.split(separator: "-")[0]) })
        try s.drop("job.json", s.imageJob("image:watched"))
        #expect(await s.wait(upTo: .seconds(20)) { s.jobFiles(s.spool.done) == ["job.json"] })
        kill(pid, SIGTERM)
        #expect(await s.exit(of: strace, upTo: .seconds(20)) == 0)

        let text = s.text(tracePath)
        let calls = Trace.parse(text)
        let record = try #require(calls.lastIndex { $0.name.hasPrefix("rename") && $0.text.contains(OutputStore.fileName(forKey: "image:watched")) })
        let toDone = try #require(calls.firstIndex { $0.name.hasPrefix("rename") && $0.text.contains("\"\(s.spool.done)/job.json\"") })
        let syncfs = try #require(calls.firstIndex { $0.name == "syncfs" })
        let openDone = try #require(calls.lastIndex { $0.name == "openat" && $0.text.contains("\"\(s.spool.done)\"") && $0.text.contains("O_DIRECTORY") })
        let doneFD = try #require(calls[openDone].result)
        let syncDone = try #require(calls[openDone...].firstIndex { $0.name == "fsync" && $0.firstArgument == doneFD })
        let logged = try #require(calls.firstIndex { $0.name == "write" && $0.firstArgument == 2 && $0.text.contains("job.json: done") })
        #expect(record < syncfs, "the record is written before the syncfs: \(text)")
        #expect(syncfs < toDone, "payloads and records are on disk before the file reaches done/")
        #expect(toDone < openDone && openDone < syncDone, "done/ is fsync'ed after the rename")
        #expect(syncDone < logged, "and only then is it reported")
    }
}

/// Runs the binary under strace and reads the calls back.
enum Trace {
    static let strace: String? = ["/usr/bin/strace", "/bin/strace"].first { access($0, X_OK) == 0 }
    static let syscalls = "openat,fsync,fdatasync,rename,renameat,renameat2,syncfs,write"

    struct Call {
        var name: String
        var text: String
        /// The first argument as a number (a descriptor), when it is one.
        var firstArgument: Int32?
        /// The returned value, when the call is complete in its line.
        var result: Int32?
    }

    struct Output {
        var status: Int32
        var text: String
        var calls: [Call] { Trace.parse(text) }
    }

    static func run(_ arguments: [String], in w: Workspace) async throws -> Output {
        let path = "\(w.root)/trace-\(UUID().uuidString)"
        let result = try await RunnerBinary.runExecutable(
            strace!, ["-f", "-s", "512", "-o", path, "-e", "trace=\(syscalls)", RunnerBinary.path] + arguments, in: w.root)
        return Output(status: result.status, text: (try? String(contentsOfFile: path, encoding: .utf8)) ?? "")
    }

    /// `PID name(args) = result` lines. A call another thread's line interrupted
    /// (`name(args <unfinished ...>`) gets its result from its `<... name resumed> = result`
    /// line, the next of its process.
    static func parse(_ text: String) -> [Call] {
        var calls: [Call] = []
        var unfinished: [Substring: Int] = [:]  // by PID, the call waiting for its resumed line
        for line in text.split(separator: "\n") {
            var rest = Substring(line)
            var pid: Substring = ""
            if let space = rest.firstIndex(of: " "), rest[..<space].allSatisfy(\.isNumber) {
                pid = rest[..<space]
                rest = rest[rest.index(after: space)...]
            }
            rest = rest.drop(while: { $0 == " " })
            if rest.hasPrefix("<...") {
                if let index = unfinished.removeValue(forKey: pid) { calls[index].result = result(of: rest) }
                continue
            }
            guard !rest.hasPrefix("+++"), !rest.hasPrefix("---"), let paren = rest.firstIndex(of: "(") else { continue }
            let name = String(rest[..<paren])
            let arguments = rest[rest.index(after: paren)...]
            let first = arguments.prefix { $0 != "," && $0 != ")" && $0 != " " }
            calls.append(Call(name: name, text: String(rest), firstArgument: Int32(first), result: result(of: rest)))
            if rest.hasSuffix("<unfinished ...>") { unfinished[pid] = calls.count - 1 }
        }
        return calls
    }

    /// The number after the last `) = ` of a line, if any.
    private static func result(of line: Substring) -> Int32? {
        guard let equals = line.range(of: ") = ", options: .backwards) else { return nil }
        return Int32(line[equals.upperBound...].prefix { $0 == "-" || $0.isNumber })
    }
}

/// The trace's reading, without strace: a call another thread's line cut in two still has its
/// result (the descriptor a later call uses).
@Suite struct TraceParseTests {
    @Test func aCallInterruptedInTheTraceGetsItsResultFromItsResumedLine() {
        let text = """
            101 openat(AT_FDCWD, "/s/done", O_RDONLY|O_CLOEXEC|O_DIRECTORY <unfinished ...>
            102 write(2, "x", 1) = 1
            101 <... openat resumed>) = 12
            101 fsync(12) = 0
            102 openat(AT_FDCWD, "/s/gone", O_RDONLY) = -1 ENOENT (No such file or directory)
            """
        let calls = Trace.parse(text)
        #expect(calls.map(\.name) == ["openat", "write", "fsync", "openat"])
        #expect(calls.map(\.result) == [12, 1, 0, -1])
        #expect(calls[2].firstArgument == 12)
    }
}
