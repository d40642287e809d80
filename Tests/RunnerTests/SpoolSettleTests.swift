import Foundation
import RunnerTestSupport
import Glibc
import RunnerKit
import Testing

/// Files written in place under their final name in inbox/, as scp, FTP and SMB uploads, `cp`
/// and `cat > file` do: taken only once complete, never sent to failed/ half-written.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)))
struct SpoolSettleTests {
    /// A batch of 2000 lines, one image job each, about 250 KB.
    static func batch(_ s: SpoolWorld) -> [UInt8] {
        Array((0..<2000).map { s.imageJob("image:settle-\($0)", query: "?n=\($0)") + "\n" }.joined().utf8)
    }

    /// Writes `bytes` to `path` in 16 KiB pieces with `pause` between them, keeping the file open
    /// the whole time (`keepOpen`) or opening and closing it for each piece.
    static func writeInPlace(_ bytes: [UInt8], to path: String, pause: Duration, keepOpen: Bool) async throws {
        let piece = 16 * 1024
        var fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        var offset = 0
        while offset < bytes.count {
            if !keepOpen && fd < 0 { fd = open(path, O_WRONLY | O_APPEND) }
            let end = min(bytes.count, offset + piece)
            let written = bytes[offset..<end].withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
            #expect(written == end - offset)
            offset = end
            if !keepOpen {
                close(fd)
                fd = -1
            }
            if offset < bytes.count { try await Task.sleep(for: pause) }
        }
        if fd >= 0 { close(fd) }
    }

    func runsWhole(keepOpen: Bool, settle: String, pause: Duration) async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        // Rescans every 0.2 s: each pause is longer than the rescan period, so the watcher sees
        // the file half-written many times over.
        let watcher = try s.startWatcher(["--rescan", "0.2", "--settle", settle, "--concurrency", "16"])
        defer { watcher.terminate() }
        #expect(await s.wait(upTo: .seconds(10)) { s.log().contains("watching") })
        let bytes = Self.batch(s)
        try await Self.writeInPlace(bytes, to: "\(s.spool.inbox)/batch.jsonl", pause: pause, keepOpen: keepOpen)

        let through = await s.wait(upTo: .seconds(90)) { !s.jobFiles(s.spool.done).isEmpty || !s.jobFiles(s.spool.failed).isEmpty }
        #expect(through, "\(s.log())")
        #expect(s.jobFiles(s.spool.failed).isEmpty, "nothing reaches failed/: \(s.text("\(s.spool.failed)/batch.jsonl\(Spool.errorSuffix)"))")
        #expect(s.jobFiles(s.spool.done) == ["batch.jsonl"])
        let records = s.records(s.spool.done, "batch.jsonl")
        #expect(records.count == 2000, "every line ran")
        #expect(records.allSatisfy { $0["status"] == .string("succeeded") })
        #expect(s.text("\(s.spool.done)/batch.jsonl").utf8.count == bytes.count, "the whole file was taken")
    }

    /// The writer keeps the file open and pauses longer than the settle time too: only the
    /// read lease (refused while a writer has the file open) keeps the watcher off it.
    @Test func aBatchWrittenInPlaceByAWriterThatKeepsItOpenRunsWhole() async throws {
        try await runsWhole(keepOpen: true, settle: "0.3", pause: .milliseconds(500))
    }

    /// The writer closes the file after each piece (each close is an IN_CLOSE_WRITE): the settle
    /// time keeps the watcher off it. Far above the pauses, which a loaded machine stretches.
    @Test func aBatchWrittenInPlaceByAWriterThatClosesBetweenPiecesRunsWhole() async throws {
        try await runsWhole(keepOpen: false, settle: "5", pause: .milliseconds(300))
    }

    // A file written in place and closed is taken once it has settled, one renamed in at once:
    // SpoolFeedTests shows both in process, on the test clock.
}

/// The settle time alone, where no read lease can be had: a suite of its own, so that it runs
/// beside the two above.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(3)))
struct SpoolSettleWithoutLeaseTests {
    /// Where no read lease can be had (the watcher does not own the file and lacks CAP_LEASE),
    /// the settle time decides alone: a writer whose pauses are shorter than `--settle` still
    /// gets its file run whole. The watcher runs as nobody; the producer (this test) is root.
    @Test(.enabled(if: getuid() == 0 && access("/usr/bin/setpriv", X_OK) == 0, "needs root and setpriv"))
    func withoutALeaseTheSettleTimeAloneKeepsAHalfWrittenFile() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        try FileManager.default.createDirectory(atPath: s.w.out, withIntermediateDirectories: true)
        for path in [s.w.root, s.spool.root, s.spool.inbox, s.spool.active, s.spool.done, s.spool.failed, s.spool.cancel, s.spool.locks, s.w.out] {
            #expect(chown(path, 65534, 65534) == 0)
        }
        chmod(s.w.root, 0o755)
        chmod(s.spool.inbox, 0o777)  // the producer (root) writes there anyway
        let watcher = try ChildProcess(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", RunnerBinary.path,
             "watch", "--spool", s.spool.root, "--out", s.w.out, "--rescan", "0.2", "--settle", "5", "--concurrency", "16"],
            stdout: .null, stderr: .file("\(s.w.root)/watch.stderr"))
        defer { watcher.terminate() }
        #expect(await s.wait(upTo: .seconds(10)) { s.log().contains("watching") }, "\(s.log())")
        let bytes = SpoolSettleTests.batch(s)
        try await SpoolSettleTests.writeInPlace(bytes, to: "\(s.spool.inbox)/batch.jsonl", pause: .milliseconds(400), keepOpen: true)
        let through = await s.wait(upTo: .seconds(90)) { !s.jobFiles(s.spool.done).isEmpty || !s.jobFiles(s.spool.failed).isEmpty }
        #expect(through, "\(s.log())")
        #expect(s.jobFiles(s.spool.failed).isEmpty, "\(s.text("\(s.spool.failed)/batch.jsonl\(Spool.errorSuffix)"))")
        #expect(s.records(s.spool.done, "batch.jsonl").count == 2000)
    }
}
