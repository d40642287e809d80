import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// The kept bytes of a cut transfer live in an output a fleet may share, so a neighbour may have
/// planted them, or be writing them: the runner resumes only a partial it can check and lock,
/// verifies what it kept against bytes the server sends again, and sends nothing a sidecar says
/// without the checks a record's validators pass. Each test plants its files as a neighbour
/// would, then runs the real binary against the fixture server's `/ranged/N`.
@Suite(.startsProcesses, .timeLimit(.minutes(3)))
struct PartialTrustTests {
    static let size = RangeResumeTests.size
    static let cut = RangeResumeTests.cut

    /// A job of the test kind for `/ranged/N` with `query`; its URL, as the sidecar must name it.
    static func job(_ w: Workspace, name: String, query: String, retries: Int = 0) -> (json: String, url: String) {
        let url = "\(w.base)/ranged/\(size)?\(query)"
        return (#"{"kind": "file", "name": "\#(name)", "url": "\#(url)", "timeout": 20, "retries": \#(retries)}"#, url)
    }

    /// Writes a sidecar for `key` beside where its partial goes in `files/`, as a neighbour may.
    static func plantSidecar(_ w: Workspace, key: String, url: String, etag: String, bytes: Int, inode: Int) throws {
        let sidecar = JSONValue.object([
            ("key", .string(key)), ("url", .string(url)), ("validator", .object([("etag", .string(etag))])),
            ("bytes", JSONValue(bytes)), ("total", JSONValue(size)), ("inode", JSONValue(inode)),
        ])
        try Data(JSONWriter.data(sidecar)).write(to: URL(fileURLWithPath: "\(w.out)/files/\(PartialDownload.name(forKey: key)).json"))
    }

    /// Writes `bytes` as the partial of `key`, a file of its own; returns its inode.
    static func plantPartial(_ w: Workspace, key: String, bytes: [UInt8]) throws -> Int {
        try FileManager.default.createDirectory(atPath: "\(w.out)/files", withIntermediateDirectories: true)
        let path = "\(w.out)/files/\(PartialDownload.name(forKey: key))"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return try inode(path)
    }

    static func inode(_ path: String) throws -> Int {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw POSIXError(.ENOENT) }
        return Int(info.st_ino)
    }

    static func info(_ path: String) -> stat? {
        var info = stat()
        return lstat(path, &info) == 0 ? info : nil
    }

    @Test(arguments: ["curl", "urlsession"])
    func aHardLinkPlantedAsThePartialLeavesTheFileItNamesUntouched(http: String) async throws {
        let w = try Workspace()
        RangeResumeTests.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        let (job, url) = Self.job(w, name: "a", query: "id=\(id)")
        w.write("job.json", job)
        // A file outside the output, linked in as the key's partial, with a sidecar naming it.
        let outside = "\(w.root)/outside.bin"
        let original = [UInt8](repeating: 0x5A, count: 2_500_000)
        try Data(original).write(to: URL(fileURLWithPath: outside))
        try FileManager.default.createDirectory(atPath: "\(w.out)/files", withIntermediateDirectories: true)
        let partial = "\(w.out)/files/\(PartialDownload.name(forKey: "file:a"))"
        #expect(link(outside, partial) == 0)
        try Self.plantSidecar(w, key: "file:a", url: url, etag: "\"v0\"", bytes: Self.cut, inode: try Self.inode(outside))
        let before = try #require(Self.info(outside))

        let result = try await w.run(["run", "job.json", "--kinds", "k", "--http", http])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let after = try #require(Self.info(outside))
        let untouched = FileManager.default.contents(atPath: outside).map { [UInt8]($0) } == original
        #expect(untouched, "the file outside the output keeps its bytes")
        #expect(after.st_size == before.st_size && after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
        #expect(after.st_nlink == 1, "the planted link was replaced, not written through")
        let record = try w.record("file:a")
        #expect(record["status"]?.stringValue == "succeeded" && record["resumedFrom"] == nil, "\(record)")
        let same = w.payload("files/a.bin") == RangeResumeTests.file()
        #expect(same)
        let seen = try await RangeResumeTests.log(w, id: String(id))
        #expect(seen.count == 1 && seen[0].range == nil, "nothing was resumed: \(seen)")
    }

    @Test(arguments: ["curl", "urlsession"])
    func plantedBytesWithASidecarNamingThemNeverBecomeThePayload(http: String) async throws {
        let w = try Workspace()
        RangeResumeTests.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        // Planted: bytes that are not the server's, in a file of the runner's owner, one link,
        // and a sidecar naming its inode, the job's URL and the server's own ETag.
        let (planted, plantedURL) = Self.job(w, name: "planted", query: "id=\(id)-planted")
        let garbage = [UInt8](repeating: 0xA5, count: Self.cut)
        try Self.plantSidecar(
            w, key: "file:planted", url: plantedURL, etag: "\"v0\"", bytes: Self.cut, inode: try Self.plantPartial(w, key: "file:planted", bytes: garbage))
        // The same with the server's own bytes: resumed (so the setup is one the runner resumes).
        let (honest, honestURL) = Self.job(w, name: "honest", query: "id=\(id)-honest")
        let first = Array(RangeResumeTests.file()[0..<Self.cut])
        try Self.plantSidecar(
            w, key: "file:honest", url: honestURL, etag: "\"v0\"", bytes: Self.cut, inode: try Self.plantPartial(w, key: "file:honest", bytes: first))
        w.write("jobs.jsonl", planted + "\n" + honest)

        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k", "--http", http])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let record = try w.record("file:planted")
        let same = w.payload("files/planted.bin") == RangeResumeTests.file()
        #expect(same, "the payload is the server's bytes: \(record)")
        #expect(record["sha256"]?.stringValue == SHA256.hex(RangeResumeTests.file()) && record["bytes"]?.intValue == Self.size, "\(record)")
        #expect(record["resumedFrom"] == nil, "\(record)")
        #expect(record["startedOver"]?.stringValue?.contains("differ from the 65536 kept there") == true, "\(record)")
        let seen = try await RangeResumeTests.log(w, id: "\(id)-planted")
        #expect(seen.count == 2 && seen[0].range == "bytes=\(RangeResumeTests.asked)-" && seen[1].range == nil, "\(seen)")

        let resumed = try w.record("file:honest")
        #expect(resumed["resumedFrom"]?.intValue == Self.cut && resumed["startedOver"] == nil, "\(resumed)")
        let sameHonest = w.payload("files/honest.bin") == RangeResumeTests.file()
        #expect(sameHonest)
        #expect(w.outputFiles().filter { $0.contains(".partial-") }.isEmpty, "\(w.outputFiles())")
    }

    @Test(arguments: ["curl", "urlsession"])
    func controlCharactersInASidecarsValidatorNeverReachTheServer(http: String) async throws {
        let w = try Workspace()
        RangeResumeTests.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        let (job, url) = Self.job(w, name: "crlf", query: "id=\(id)")
        let first = Array(RangeResumeTests.file()[0..<Self.cut])
        try Self.plantSidecar(
            w, key: "file:crlf", url: url, etag: "\"v0\"\r\nX-Injected: 1", bytes: Self.cut, inode: try Self.plantPartial(w, key: "file:crlf", bytes: first))
        w.write("job.json", job)

        let result = try await w.run(["run", "job.json", "--kinds", "k", "--http", http])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let record = try w.record("file:crlf")
        #expect(record["status"]?.stringValue == "succeeded" && record["resumedFrom"] == nil, "\(record)")
        let same = w.payload("files/crlf.bin") == RangeResumeTests.file()
        #expect(same)
        let (data, _) = try await URLSession.shared.data(from: URL(string: "\(w.base)/ranged-log?id=\(id)")!)
        let log = try JSONParser.parse([UInt8](data))
        guard case .array(let requests) = log else { Issue.record("no log: \(log)"); return }
        #expect(requests.count == 1, "\(log)")
        for request in requests {
            guard case .array(let names)? = request["headers"] else { Issue.record("no header names: \(log)"); continue }
            let sent = names.compactMap { (name: JSONValue) in name.stringValue }
            #expect(!sent.isEmpty && !sent.contains("x-injected") && !sent.contains("if-range") && !sent.contains("range"), "\(sent)")
        }
    }

    /// Another attempt holds the partial's lock (a watcher frozen past its lease, say): this one
    /// does not resume it, does not touch it, and stores the whole body it fetched.
    @Test(arguments: ["curl", "urlsession"])
    func aPartialAnotherAttemptHoldsIsNeitherResumedNorTouched(http: String) async throws {
        let w = try Workspace()
        RangeResumeTests.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        let (job, _) = Self.job(w, name: "held", query: "id=\(id)&cut=\(Self.cut)")
        w.write("job.json", job)
        #expect(try await w.run(["run", "job.json", "--kinds", "k", "--http", http]).status != 0)
        let partial = "\(w.out)/files/\(PartialDownload.name(forKey: "file:held"))"
        let sidecar = FileManager.default.contents(atPath: partial + ".json")
        let before = try #require(Self.info(partial), "the cut run kept its bytes: \(w.outputFiles())")
        #expect(sidecar != nil)

        let fd = open(partial, O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
        defer { close(fd) }
        let result = try await w.run(["run", "job.json", "--kinds", "k", "--http", http])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let record = try w.record("file:held")
        #expect(record["resumedFrom"] == nil, "\(record)")
        let same = w.payload("files/held.bin") == RangeResumeTests.file()
        #expect(same)
        let after = try #require(Self.info(partial), "the held partial is still there")
        #expect(after.st_ino == before.st_ino && after.st_size == before.st_size, "the held partial is the same file, the same size")
        #expect(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec, "and was not written")
        #expect(FileManager.default.contents(atPath: partial + ".json") == sidecar, "its sidecar is untouched")
        let seen = try await RangeResumeTests.log(w, id: String(id))
        #expect(seen.count == 2 && seen[1].range == nil, "the second run asked for the whole file: \(seen)")
    }

    /// Two runners of one key at once (a watcher frozen past its lease, and the one that took its
    /// job over): the second leaves the partial the first is writing alone, and stores the whole
    /// body it fetched itself.
    @Test(arguments: ["curl", "urlsession"])
    func aSecondRunnerOfAKeyLeavesThePartialTheFirstIsWritingAlone(http: String) async throws {
        let w = try Workspace()
        RangeResumeTests.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        // The first runner's body stops after 2 000 000 bytes and then sends a byte a minute.
        let slow = "\(w.base)/ranged/\(Self.size)?id=\(id)-slow&trickleAfter=\(Self.cut)&trickle=60000"
        w.write("slow.json", #"{"kind": "file", "name": "both", "url": "\#(slow)", "timeout": 120, "stall": 120}"#)
        // A watcher (watchers share an output; `run` holds it alone) runs it.
        #expect(try await w.run(["submit", "slow.json", "--spool", "spool", "--kinds", "k"]).status == 0)
        let first = try ChildProcess(
            RunnerBinary.path, ["watch", "--spool", "\(w.root)/spool", "--kinds", "\(w.root)/k", "--out", w.out, "--http", http],
            directory: w.root, stdout: .null, stderr: .file("\(w.root)/watch.stderr"))
        defer { first.terminate(grace: .zero) }
        let partial = "\(w.out)/files/\(PartialDownload.name(forKey: "file:both"))"
        let deadline = ContinuousClock.now + .seconds(30)
        while (Self.info(partial)?.st_size ?? 0) < Self.cut || !FileManager.default.fileExists(atPath: partial + ".json"),
            ContinuousClock.now < deadline, first.isRunning
        {
            try await Task.sleep(for: .milliseconds(50))
        }
        let log = (try? String(contentsOfFile: "\(w.root)/watch.stderr", encoding: .utf8)) ?? ""
        let before = try #require(Self.info(partial), "the first runner writes its partial: \(w.outputFiles()) \(log)")
        let sidecar = FileManager.default.contents(atPath: partial + ".json")
        #expect(before.st_size == off_t(Self.cut) && sidecar != nil)

        // The same key, fetched whole and at once by a second runner. Runners of one output
        // take turns by the key's lock in .locks/keys; two at once are runners that take none (a
        // queue's watchers, whose queue holds the key: one frozen past its lease and the one that
        // took its job over), which removing the lock file the first one locked stands in for
        // (the second makes a new one).
        #expect(unlink("\(w.out)/.locks/keys") == 0)
        let (job, _) = Self.job(w, name: "both", query: "id=\(id)-fast")
        w.write("fast.json", job)
        let second = try await w.run(["run", "fast.json", "--kinds", "k", "--http", http])
        #expect(second.status == 0, "\(second.stdout)\(second.stderr)")
        let same = w.payload("files/both.bin") == RangeResumeTests.file()
        #expect(same)
        #expect(try w.record("file:both")["resumedFrom"] == nil)
        #expect(first.isRunning, "the first runner was still writing its partial")
        let after = try #require(Self.info(partial), "the first runner's partial is still there")
        #expect(after.st_ino == before.st_ino, "and is the same file, not replaced")
        #expect(FileManager.default.contents(atPath: partial + ".json") == sidecar, "its sidecar is untouched")
        first.signal(SIGKILL)
        await first.waitUntilExit()
    }

    /// A 206 whose body ends before its Content-Range says is a cut: kept, and resumed by the
    /// next attempt; the record of the run that saw it is not a success.
    @Test(arguments: ["curl", "urlsession"])
    func a206ThatEndsBeforeItsContentRangeIsACutNeverASuccess(http: String) async throws {
        let w = try Workspace()
        RangeResumeTests.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        // The first answer is cut at 2 000 000; the second, a 206, carries the 64 KiB asked
        // again and 10 bytes more, and ends there, cleanly.
        let (job, _) = Self.job(w, name: "short", query: "id=\(id)&cut=\(Self.cut)&range=short", retries: 1)
        w.write("job.json", job)
        let first = try await w.run(["run", "job.json", "--kinds", "k", "--http", http])
        #expect(first.status != 0, "\(first.stdout)")
        let record = try w.record("file:short")
        #expect(record["status"]?.stringValue == "failed", "\(record)")
        #expect(record["error"]?.stringValue?.contains("ended after byte 2000010 of the 3000000 its Content-Range announced") == true, "\(record)")
        #expect(w.payload("files/short.bin") == nil, "nothing was stored")
        let sidecar = try JSONParser.parse([UInt8](try #require(FileManager.default.contents(atPath: "\(w.out)/files/\(PartialDownload.name(forKey: "file:short")).json"))))
        #expect(sidecar["bytes"]?.intValue == Self.cut + 10, "the 10 bytes that came are kept: \(sidecar)")

        let second = try await w.run(["run", "job.json", "--kinds", "k", "--http", http])
        #expect(second.status == 0, "\(second.stdout)\(second.stderr)")
        let done = try w.record("file:short")
        #expect(done["status"]?.stringValue == "succeeded" && done["resumedFrom"]?.intValue == Self.cut + 10, "\(done)")
        let same = w.payload("files/short.bin") == RangeResumeTests.file()
        #expect(same)
        #expect(done["sha256"]?.stringValue == SHA256.hex(RangeResumeTests.file()))
    }

    /// `--keep-partials` caps the bytes the kept partials take: keeping one past it removes the
    /// oldest first.
    @Test func keepPartialsCapsTheKeptBytesOldestFirst() async throws {
        let w = try Workspace()
        RangeResumeTests.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        let names = ["a", "b", "c"]
        w.write("jobs.jsonl", names.map { Self.job(w, name: $0, query: "id=\(id)-\($0)&cut=\(Self.cut)").json }.joined(separator: "\n"))
        // One at a time, so that a's is the oldest: three partials of 2 000 000 bytes, 5M allowed.
        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k", "--concurrency", "1", "--keep-partials", "5M"])
        #expect(result.status != 0)
        let kept = names.filter { FileManager.default.fileExists(atPath: "\(w.out)/files/\(PartialDownload.name(forKey: "file:\($0)"))") }
        #expect(kept == ["b", "c"], "\(w.outputFiles())")
        let sidecars = w.outputFiles().filter { $0.hasSuffix(".json") && $0.contains(".partial-") }
        #expect(sidecars.count == 2, "a's sidecar went with it: \(sidecars)")

        // 0 keeps none; a size it cannot read is refused before anything runs.
        w.write("again.jsonl", names.map { Self.job(w, name: $0, query: "id=\(id)-again-\($0)&cut=\(Self.cut)").json }.joined(separator: "\n"))
        let none = try await w.run(["run", "again.jsonl", "--kinds", "k", "--keep-partials", "0"])
        #expect(none.status != 0)
        #expect(w.outputFiles().filter { $0.contains(".partial-") }.isEmpty, "\(w.outputFiles())")
        let bad = try await w.run(["run", "jobs.jsonl", "--kinds", "k", "--keep-partials", "1x"])
        #expect(bad.status == 2 && bad.stderr.contains("--keep-partials must be a number of bytes"), "\(bad.stderr)")
        let watch = try await w.run(["watch", "--help"])
        #expect(watch.stdout.contains("--keep-partials SIZE"), "\(watch.stdout)")
    }

    /// `prune` removes a partial whose key's record is final and finished after the partial
    /// was last written; a partial whose key's last record failed stays for the next attempt.
    @Test func pruneRemovesAPartialItsKeysLaterFinalRecordMadeUseless() async throws {
        let w = try Workspace()
        RangeResumeTests.writeKind(w)
        let id = UUID().uuidString.prefix(8)
        let jobs = ["done", "failed"].map { Self.job(w, name: $0, query: "id=\(id)-\($0)&cut=\(Self.cut)").json }
        w.write("jobs.jsonl", jobs.joined(separator: "\n"))
        #expect(try await w.run(["run", "jobs.jsonl", "--kinds", "k"]).status != 0)
        let done = "\(w.out)/files/\(PartialDownload.name(forKey: "file:done"))"
        let failed = "\(w.out)/files/\(PartialDownload.name(forKey: "file:failed"))"
        #expect(FileManager.default.fileExists(atPath: done) && FileManager.default.fileExists(atPath: failed), "\(w.outputFiles())")

        // done succeeds while its partial is held by another attempt: the partial stays behind.
        let fd = open(done, O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
        w.write("done.json", jobs[0])
        #expect(try await w.run(["run", "done.json", "--kinds", "k"]).status == 0)
        #expect(try w.status("file:done") == "succeeded")
        let held = try await w.run(["prune", "out"])
        #expect(held.status == 0 && FileManager.default.fileExists(atPath: done), "a partial being written stays: \(held.stdout)")
        close(fd)

        let dry = try await w.run(["prune", "out", "--dry-run"])
        let relative = "files/\(PartialDownload.name(forKey: "file:done"))"
        #expect(dry.stdout.contains("  \(relative)\n") && dry.stdout.contains("  \(relative).json\n"), "\(dry.stdout)")
        #expect(FileManager.default.fileExists(atPath: done))
        let pruned = try await w.run(["prune", "out"])
        #expect(pruned.status == 0, "\(pruned.stdout)\(pruned.stderr)")
        #expect(!FileManager.default.fileExists(atPath: done) && !FileManager.default.fileExists(atPath: done + ".json"), "\(pruned.stdout)")
        #expect(FileManager.default.fileExists(atPath: failed) && FileManager.default.fileExists(atPath: failed + ".json"), "\(pruned.stdout)")
        #expect(!pruned.stdout.contains(PartialDownload.name(forKey: "file:failed")), "\(pruned.stdout)")
    }
}
