import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// What others may plant in a spool: links, FIFOs, huge files, names that are not UTF-8. None
/// of it blocks the watcher, crashes it, or gets a file written through a link.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct SpoolHostileTests {
    @Test func aSymlinkPlantedInLocksIsNeverWrittenThrough() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let victim = s.w.write("victim.txt", "precious\n")
        let lockName = OutputStore.fileName(forKey: "image:planted")
        try FileManager.default.createSymbolicLink(atPath: "\(s.spool.locks)/\(lockName)", withDestinationPath: victim)
        let watcher = try s.startWatcher()
        defer { watcher.terminate() }
        try s.drop("planted.json", s.imageJob("image:planted"))
        #expect(await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.done) == ["planted.json"] }, "\(s.log())")
        #expect(s.text(victim) == "precious\n", "the link's target is untouched")
        #expect(try s.w.status("image:planted") == "succeeded")
    }

    /// A FIFO or a 1 GiB sparse file in cancel/: the watcher reads neither whole nor waits on
    /// one; a job submitted afterwards runs, and SIGTERM still stops it at once.
    @Test(arguments: ["fifo", "sparse"])
    func junkInCancelDoesNotStallTheWatcher(kind: String) async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let watcher = try s.startWatcher()
        defer { watcher.terminate() }
        #expect(await s.wait(upTo: .seconds(10)) { s.log().contains("watching") })
        let path = "\(s.spool.cancel)/\(OutputStore.fileName(forKey: "image:x"))"
        if kind == "fifo" {
            #expect(mkfifo(path, 0o600) == 0)
        } else {
            let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
            #expect(ftruncate(fd, 1 << 30) == 0)
            close(fd)
        }
        try await Task.sleep(for: .milliseconds(100))
        // `runner status` reads cancel/ too, and must not hang on it either.
        let status = try await s.w.run(["status", "--spool", s.spool.root])
        #expect(status.status == 0)
        try s.drop("after.json", s.imageJob("image:after"))
        #expect(await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.done) == ["after.json"] }, "\(s.log())")
        let signalled = ContinuousClock.now
        watcher.terminate()
        #expect(await s.exit(of: watcher, upTo: .seconds(10)) == 0)
        #expect(signalled.duration(to: .now) < .seconds(8), "a watcher stuck on the junk would never end")
    }

    @Test func aNameThatIsNotUTF8GoesToFailedAndTheWatcherGoesOn() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let watcher = try s.startWatcher(["--rescan", "0.2"])
        defer { watcher.terminate() }
        // "bad\xff.json": written elsewhere, renamed in by its raw bytes.
        let staging = s.w.write("staging.json", s.imageJob("image:strange"))
        var target = Array("\(s.spool.inbox)/bad".utf8) + [0xFF] + Array(".json".utf8) + [0]
        let moved = target.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { rename(staging, $0.baseAddress!) }
        }
        #expect(moved == 0)
        let failed = await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.failed).count == 1 }
        #expect(failed, "\(s.log())")
        let name = try #require(s.jobFiles(s.spool.failed).first)
        #expect(name.hasPrefix("bad_-") && name.hasSuffix(".json"), "\(name)")
        #expect(s.text("\(s.spool.failed)/\(name)\(Spool.errorSuffix)").contains("not UTF-8 (bytes 626164ff2e6a736f6e)"))
        #expect(allNames(s.spool.inbox).isEmpty, "nothing left in inbox/")

        try s.drop("next.json", s.imageJob("image:next"))
        #expect(await s.wait(upTo: .seconds(10)) { s.jobFiles(s.spool.done) == ["next.json"] })
        #expect(watcher.isRunning)
    }

    @Test func spoolFoldersAre0700Or2770WithAGroup() async throws {
        let s = try SpoolWorld()
        let job = s.w.write("job.json", s.imageJob("image:mode"))
        let plain = try await s.w.run(["submit", job, "--spool", s.spool.root])
        #expect(plain.status == 0, "\(plain.stderr)")
        for folder in [s.spool.root, s.spool.inbox, s.spool.done, s.spool.failed, s.spool.cancel, s.spool.locks, s.spool.active] {
            #expect(Self.mode(folder) == 0o700, "\(folder): \(String(Self.mode(folder), radix: 8))")
        }
        #expect(Self.mode("\(s.spool.inbox)/job.json") == 0o600)

        let group = getgid()
        let grouped = Spool(root: "\(s.w.root)/shared")
        let name = String(cString: getgrgid(group).pointee.gr_name)
        let shared = try await s.w.run(["submit", job, "--spool", grouped.root, "--group", name])
        #expect(shared.status == 0, "\(shared.stderr)")
        for folder in [grouped.root, grouped.inbox, grouped.done, grouped.locks] {
            #expect(Self.mode(folder) == 0o2770, "\(folder): \(String(Self.mode(folder), radix: 8))")
            #expect(Self.group(folder) == group)
        }
        #expect(Self.mode("\(grouped.inbox)/job.json") == 0o660)

        let unknown = try await s.w.run(["submit", job, "--spool", grouped.root, "--group", "no-such-group-here"])
        #expect(unknown.status == 2)
        #expect(unknown.stderr.contains("no group named 'no-such-group-here'"), "\(unknown.stderr)")
    }

    static func mode(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
    }

    static func group(_ path: String) -> gid_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_gid : gid_t.max
    }
}

/// Names in a folder, dot-names included.
private func allNames(_ folder: String) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
}
