import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// `--events FILE` through the binary: a FIFO read while jobs run, one nobody reads, and a watcher.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct EventsTests {
    /// Reads a FIFO without blocking until `finished()` holds and nothing more comes.
    static func drain(_ path: String, until finished: @escaping @Sendable () -> Bool) async -> [JSONValue] {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let ended = finished()
            let got = read(fd, &buffer, buffer.count)
            if got > 0 {
                bytes += buffer[..<got]
            } else if ended {
                break
            } else {
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }

    static func byKey(_ events: [JSONValue]) -> [String: [String]] {
        var byKey: [String: [String]] = [:]
        for event in events {
            guard let key = event["key"]?.stringValue, let name = event["event"]?.stringValue else { continue }
            byKey[key, default: []].append(name)
        }
        return byKey
    }

    @Test func aFIFOReadWhileJobsRunTellsEachJobsStoryInOrder() async throws {
        let w = try Workspace()
        let fifo = "\(w.root)/events.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let jobs = (1...4).map { #"{"kind": "image", "key": "slow:\#($0)", "url": "\#(w.base)/images/png.png?delay=150&n=\#($0)"}"# }
            + [#"{"kind": "entry", "id": "x", "key": "busy", "url": "\#(w.base)/entries/x.json?status=503", "retries": 1}"#]
        w.write("jobs.jsonl", jobs.joined(separator: "\n"))
        let done = Locked(false)
        let reading = Task { await Self.drain(fifo) { done.withLock { $0 } } }
        let result = try await w.run(["run", "jobs.jsonl", "--events", fifo, "--per-host", "1"])
        done.withLock { $0 = true }
        let events = await reading.value
        #expect(result.status == 1, "busy fails: \(result.stderr)")
        #expect(!result.stderr.contains("--events"), "nothing lost: \(result.stderr)")

        let byKey = Self.byKey(events)
        for n in 1...4 {
            let story = byKey["slow:\(n)"] ?? []
            #expect(story.first == "queued" && story.last == "finished", "slow:\(n): \(story)")
            #expect(story.filter { $0 == "started" }.count == 1)
            #expect((story.firstIndex(of: "started") ?? .max) < (story.firstIndex(of: "finished") ?? -1), "slow:\(n): \(story)")
        }
        #expect(byKey.values.joined().filter { $0 == "waiting" }.count >= 3, "--per-host 1 held jobs back: \(byKey)")
        #expect(byKey["busy"]?.filter { $0 == "attempt" }.count == 1, "one failed attempt before the last: \(byKey["busy"] ?? [])")
        let finished = events.filter { $0["event"]?.stringValue == "finished" }
        #expect(finished.count == 5)
        #expect(finished.allSatisfy { $0["record"]?["key"] == $0["key"] && $0["time"]?.stringValue != nil })
    }

    @Test func aFIFONobodyReadsHoldsNoJob() async throws {
        let w = try Workspace()
        let fifo = "\(w.root)/nobody.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        w.write("job.json", #"{"kind": "image", "key": "one", "url": "\#(w.base)/images/png.png"}"#)
        let started = ContinuousClock.now
        let result = try await w.run(["run", "job.json", "--events", fifo])
        #expect(started.duration(to: .now) < .seconds(10))
        #expect(result.status == 0, "the job's status decides the exit code: \(result.stderr)")
        #expect(try w.status("one") == "succeeded")
        #expect(result.stderr.contains("runner: --events: \(fifo): its reader took no more events"), "\(result.stderr)")
    }

    @Test func aWatcherWritesEventsForTheFilesItRuns() async throws {
        let world = try SpoolWorld()
        let path = "\(world.w.root)/events.jsonl"
        let watcher = try world.startWatcher(["--events", path])
        defer { if watcher.isRunning { watcher.terminate() } }
        try world.drop("a.jsonl", world.imageJob("image:a"))
        #expect(await world.wait(upTo: .seconds(20)) { world.names(world.spool.done).contains("a.jsonl") }, "\(world.log())")
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await world.exit(of: watcher, upTo: .seconds(20)) == 0)
        let events = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { try JSONParser.parse(String($0)) }
        #expect(Self.byKey(events)["image:a"] == ["queued", "started", "finished"], "\(events)")

        // Restarted with the same command line (a service manager's Restart=on-failure): the
        // watcher adds to the file instead of refusing it.
        let again = try world.startWatcher(["--events", path])
        defer { if again.isRunning { again.terminate() } }
        try world.drop("b.jsonl", world.imageJob("image:b", query: "?b=1"))
        #expect(await world.wait(upTo: .seconds(20)) { world.names(world.spool.done).contains("b.jsonl") }, "\(world.log())")
        kill(again.processIdentifier, SIGTERM)
        #expect(await world.exit(of: again, upTo: .seconds(20)) == 0, "\(world.log())")
        let both = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map { try JSONParser.parse(String($0)) }
        #expect(Self.byKey(both)["image:a"] == ["queued", "started", "finished"], "the first watcher's lines kept: \(both)")
        #expect(Self.byKey(both)["image:b"] == ["queued", "started", "finished"], "\(both)")
    }

    /// `--events` never follows a link and never mixes into an existing file unasked.
    @Test func eventsRefuseALinkAndAnExistingFileUnlessAppending() async throws {
        let w = try Workspace()
        w.write("job.json", #"{"kind": "image", "key": "image:e", "url": "\#(w.base)/images/png.png"}"#)
        let target = w.write("elsewhere.txt", "keep\n")
        #expect(symlink(target, "\(w.root)/link.jsonl") == 0)
        let linked = try await w.run(["run", "job.json", "--events", "link.jsonl"])
        #expect(linked.status == 2, "\(linked.stderr)")
        #expect(linked.stderr.contains("--events: link.jsonl is a symbolic link, which --events does not follow"), "\(linked.stderr)")
        #expect(linked.stderr.split(separator: "\n").count == 1 || linked.stderr.contains("--help"), "\(linked.stderr)")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep\n")
        #expect(w.server.totalRequests == 0, "nothing ran")

        let first = try await w.run(["run", "job.json", "--events", "events.jsonl"])
        #expect(first.status == 0, "\(first.stderr)")
        let again = try await w.run(["run", "job.json", "--events", "events.jsonl"])
        #expect(again.status == 2 && again.stderr.contains("events.jsonl exists; pass --events-append"), "\(again.stderr)")
        let appended = try await w.run(["run", "job.json", "--events", "events.jsonl", "--events-append"])
        #expect(appended.status == 0, "\(appended.stderr)")
        let lines = try String(contentsOfFile: "\(w.root)/events.jsonl", encoding: .utf8).split(separator: "\n")
        #expect(lines.filter { $0.contains(#""event":"finished""#) }.count == 2, "both runs' lines: \(lines)")
        let linkedAppend = try await w.run(["run", "job.json", "--events", "link.jsonl", "--events-append"])
        #expect(linkedAppend.status == 2, "a link stays refused with --events-append: \(linkedAppend.stderr)")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep\n")
    }

    /// Reads what a FIFO's writer wrote until `done` holds of the text (or 20 s passed).
    static func readFIFO(_ fd: Int32, until done: (String) -> Bool) async -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let end = ContinuousClock.now + .seconds(20)
        while !done(String(decoding: bytes, as: UTF8.self)) && ContinuousClock.now < end {
            let got = Glibc.read(fd, &buffer, buffer.count)
            if got > 0 { bytes += buffer[..<got] } else { try? await Task.sleep(for: .milliseconds(5)) }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether `text` holds the `finished` line of `key`.
    static func finished(_ key: String, in text: String) -> Bool {
        text.split(separator: "\n").contains { $0.contains(#""event":"finished""#) && $0.contains(#""key":"\#(key)""#) }
    }

    /// A restarted reader of an --events FIFO gets the lines from then on, after a count of
    /// those lost while no one read; the watcher says so at once, and goes on.
    @Test func aFIFOIsOpenedAgainForTheNextReaderWhoIsToldWhatWasLost() async throws {
        let world = try SpoolWorld()
        let fifo = "\(world.w.root)/events.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let first = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(first >= 0)
        let watcher = try world.startWatcher(["--events", fifo])
        defer { watcher.terminate() }
        try world.drop("a.jsonl", world.imageJob("image:a"))
        let before = await Self.readFIFO(first) { Self.finished("image:a", in: $0) }
        #expect(before.contains(#""event":"finished""#), "\(before)")
        close(first)
        // No reader: b's lines are lost, and counted.
        try world.drop("b.jsonl", world.imageJob("image:b", query: "?b=1"))
        #expect(await world.wait(upTo: .seconds(20)) { world.names(world.spool.done).contains("b.jsonl") }, "\(world.log())")
        #expect(await world.wait(upTo: .seconds(10)) { world.log().contains("--events: the reader of \(fifo) went away") }, "\(world.log())")
        let second = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(second >= 0)
        defer { close(second) }
        try world.drop("c.jsonl", world.imageJob("image:c", query: "?c=1"))
        let after = await Self.readFIFO(second) { Self.finished("image:c", in: $0) }
        let events = after.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        #expect(events.first?["event"]?.stringValue == "dropped" && (events.first?["count"]?.intValue ?? 0) >= 1, "\(after)")
        #expect(Self.byKey(events)["image:c"] == ["queued", "started", "finished"], "\(after)")
        #expect(watcher.isRunning)
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await world.exit(of: watcher, upTo: .seconds(20)) == 0)
    }

    /// A FIFO whose reader left, removed and made anew at its path by a collector, is the one the
    /// next events go to: the writer never waits on the FIFO that is gone. SIGHUP meanwhile says
    /// the FIFO has no reader, not that it was reopened.
    @Test func aFIFOMadeAnewAtItsPathIsOpenedAnew() async throws {
        let world = try SpoolWorld()
        let fifo = "\(world.w.root)/events.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let first = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(first >= 0)
        let watcher = try world.startWatcher(["--events", fifo])
        defer { watcher.terminate() }
        try world.drop("a.jsonl", world.imageJob("image:a"))
        let before = await Self.readFIFO(first) { Self.finished("image:a", in: $0) }
        #expect(Self.finished("image:a", in: before), "\(before)")
        close(first)
        try world.drop("b.jsonl", world.imageJob("image:b", query: "?b=1"))
        #expect(await world.wait(upTo: .seconds(20)) { world.log().contains("--events: the reader of \(fifo) went away") }, "\(world.log())")
        kill(watcher.processIdentifier, SIGHUP)
        #expect(await world.wait(upTo: .seconds(10)) { world.log().contains("SIGHUP: --events \(fifo) has no reader now; opened anew when one comes; still watching") }, "\(world.log())")
        #expect(!world.log().contains("reopened --events"), "\(world.log())")
        // The collector removes the FIFO and makes a new one in its place.
        #expect(unlink(fifo) == 0 && mkfifo(fifo, 0o600) == 0)
        let second = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(second >= 0)
        defer { close(second) }
        try world.drop("c.jsonl", world.imageJob("image:c", query: "?c=1"))
        let after = await Self.readFIFO(second) { Self.finished("image:c", in: $0) }
        #expect(Self.finished("image:c", in: after), "the FIFO made anew gets the events: \(after)")
        let events = after.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        #expect(events.first?["event"]?.stringValue == "dropped", "what was lost comes first: \(after)")
        kill(watcher.processIdentifier, SIGHUP)
        #expect(await world.wait(upTo: .seconds(10)) { world.log().contains("SIGHUP: reopened --events \(fifo); still watching") }, "\(world.log())")
        #expect(watcher.isRunning)
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await world.exit(of: watcher, upTo: .seconds(20)) == 0)
    }

    /// SIGHUP after a rotation: --events is opened anew, the watcher goes on.
    @Test func sighupReopensTheEventsFileAndTheWatcherGoesOn() async throws {
        let world = try SpoolWorld()
        let path = "\(world.w.root)/events.jsonl"
        let metrics = "\(world.w.root)/runner.prom"
        let watcher = try world.startWatcher(["--events", path, "--metrics", metrics])
        defer { watcher.terminate() }
        try world.drop("a.jsonl", world.imageJob("image:a"))
        #expect(await world.wait(upTo: .seconds(20)) { world.names(world.spool.done).contains("a.jsonl") })
        #expect(await world.wait(upTo: .seconds(10)) { world.text(path).contains(#""event":"finished""#) })
        #expect(rename(path, path + ".1") == 0)
        unlink(metrics)
        kill(watcher.processIdentifier, SIGHUP)
        #expect(await world.wait(upTo: .seconds(10)) { world.log().contains("SIGHUP: reopened --events \(path), --metrics \(metrics); still watching") }, "\(world.log())")
        #expect(FileManager.default.fileExists(atPath: metrics), "the metrics written anew")
        try world.drop("b.jsonl", world.imageJob("image:b", query: "?b=1"))
        #expect(await world.wait(upTo: .seconds(20)) { Self.finished("image:b", in: world.text(path)) }, "\(world.text(path))")
        #expect(!world.text(path).contains(#""key":"image:a""#) && world.text(path + ".1").contains(#""key":"image:a""#))
        #expect(watcher.isRunning, "SIGHUP does not stop a watcher")
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await world.exit(of: watcher, upTo: .seconds(20)) == 0)
    }

    /// A large body reports its progress at most once a second while it moves, the bytes growing
    /// towards the total the server announced; a job with the default 2 s deadline reports none.
    @Test func aLongTransferReportsProgressAtMostOnceASecond() async throws {
        let w = try Workspace()
        try? FileManager.default.createDirectory(atPath: "\(w.root)/k", withIntermediateDirectories: true)
        // 3 000 000 bytes at 1 MiB a second: about 3 s.
        w.write("jobs.jsonl", """
            {"kind": "file", "name": "big", "url": "\(w.base)/ranged/3000000?id=\(UUID().uuidString)", "timeout": 30}
            {"kind": "file", "name": "small", "url": "\(w.base)/ranged/200000?id=\(UUID().uuidString)", "timeout": 2}
            """)
        let result = try await w.run(["run", "jobs.jsonl", "--kinds", "k", "--events", "events.jsonl", "--limit-rate", "1M"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let lines = (try? String(contentsOfFile: "\(w.root)/events.jsonl", encoding: .utf8)) ?? ""
        let events = lines.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        let progress = events.filter { $0["event"]?.stringValue == "progress" }
        let big = progress.filter { $0["key"]?.stringValue == "file:big" }
        #expect(big.count >= 2 && big.count <= 5, "about one a second for about 3 s: \(big)")
        #expect(big.allSatisfy { $0["total"]?.intValue == 3_000_000 }, "\(big)")
        let bytes = big.compactMap { $0["bytes"]?.intValue }
        #expect(bytes == bytes.sorted() && Set(bytes).count == bytes.count && (bytes.last ?? 0) < 3_000_000, "\(bytes)")
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let times = big.compactMap { $0["time"]?.stringValue.flatMap(format.date(from:)) }
        #expect(times.count == big.count)
        for (earlier, later) in zip(times, times.dropFirst()) {
            #expect(later.timeIntervalSince(earlier) > 0.9, "at most once a second: \(times)")
        }
        #expect(progress.allSatisfy { $0["key"]?.stringValue == "file:big" }, "a 2 s job reports no progress: \(progress)")
    }
}
