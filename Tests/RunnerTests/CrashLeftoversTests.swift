import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// What a power loss or a crash leaves, and how the next start deals with it.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct CrashLeftoversTests {
    /// A record survived but its payload came back empty (ext4 after a power loss, without the
    /// sync): its validators are not sent, so the next run fetches afresh instead of taking a
    /// 304 for a broken file, forever.
    @Test func aPayloadThatIsNotTheRecordsSizeIsFetchedAfreshNotRevalidated() async throws {
        let w = try Workspace()
        let jobs = w.write("job.json", #"{"kind": "image", "key": "image:etag", "url": "\#(w.base)/images/png.png"}"#)
        #expect(try await w.run(["run", jobs, "--out", w.out]).status == 0)
        let record = try w.record("image:etag")
        let output = try #require(record["output"]?.stringValue)
        let bytes = try #require(record["bytes"]?.intValue)

        #expect(try await w.run(["run", jobs, "--out", w.out]).status == 0)
        #expect(try w.status("image:etag") == "notModified", "a whole payload is revalidated")

        #expect(truncate("\(w.out)/\(output)", 0) == 0)
        #expect(try await w.run(["run", jobs, "--out", w.out]).status == 0)
        #expect(try w.status("image:etag") == "succeeded", "fetched afresh")
        #expect(try w.record("image:etag")["httpStatus"]?.intValue == 200)
        #expect(w.payload(output)?.count == bytes, "the payload is whole again")
    }

    /// Temporary files of dead processes are removed at the next start; those of live ones stay.
    @Test func leftoverTemporaryFilesOfDeadProcessesAreSweptAtStart() async throws {
        let s = try SpoolWorld()
        try s.spool.makeFolders()
        let dead = Self.deadPID()
        let live = getpid()
        try FileManager.default.createDirectory(atPath: "\(s.w.out)/images", withIntermediateDirectories: true)
        let names = [
            "\(s.w.out)/images/.tmp-\(dead).1a2b-1", "\(s.w.out)/results/.tmp-\(dead).1a2b-2",
            "\(s.spool.inbox)/.tmp-\(dead).1a2b-3", "\(s.spool.inbox)/.submit-\(dead).x",
            "\(s.spool.cancel)/.tmp-\(dead).1a2b-4",
        ]
        let keep = [
            "\(s.w.out)/images/.tmp-\(live).1a2b-5", "\(s.spool.inbox)/.tmp-\(live).1a2b-6", "\(s.spool.inbox)/.producer-writing",
            // Its process looks gone, but it was written a moment ago (another pid namespace?).
            "\(s.spool.inbox)/.tmp-\(dead).1a2b-7",
        ]
        try FileManager.default.createDirectory(atPath: "\(s.w.out)/results", withIntermediateDirectories: true)
        for path in names + keep { _ = FileManager.default.createFile(atPath: path, contents: Data("x".utf8)) }
        // Last written two minutes ago, all but the fresh one.
        for path in names + keep.dropLast() {
            var times = [timespec(tv_sec: time(nil) - 120, tv_nsec: 0), timespec(tv_sec: time(nil) - 120, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        }

        let watcher = try s.startWatcher()
        defer { watcher.terminate() }
        #expect(await s.wait(upTo: .seconds(10)) { s.log().contains("watching") })
        for path in names { #expect(!FileManager.default.fileExists(atPath: path), "\(path) is removed") }
        for path in keep { #expect(FileManager.default.fileExists(atPath: path), "\(path) stays") }
    }

    /// A pid no process has now.
    static func deadPID() -> Int32 {
        var pid: Int32 = 4_000_000
        while kill(pid, 0) == 0 || errno == EPERM { pid -= 1 }
        return pid
    }
}
