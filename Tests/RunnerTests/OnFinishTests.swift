import FixtureServer
import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// `runner run --on-finish COMMAND`: a command per finished job, after its record is durable.
/// That a watcher's file moves on only once its hooks ended, SpoolFeedTests shows in process.
@Suite(.startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct OnFinishTests {
    @Test func eachFinishedJobsHookGetsItsRecordAndEnvironment() async throws {
        let w = try Workspace()
        try FileManager.default.createDirectory(atPath: "\(w.root)/hooks", withIntermediateDirectories: true)
        w.write("jobs.jsonl", """
            {"kind": "image", "key": "image-a", "url": "\(w.base)/images/png.png"}
            {"kind": "entry", "id": "missing", "key": "entry-gone", "url": "\(w.base)/entries/{id}.json"}
            """)
        let hook = #"cat > "hooks/$RUNNER_KEY.json"; printf '%s|%s|%s|%s\n' "$RUNNER_KIND" "$RUNNER_STATUS" "$RUNNER_URL" "$RUNNER_OUTPUT" > "hooks/$RUNNER_KEY.env""#
        let result = try await w.run(["run", "jobs.jsonl", "--on-finish", hook])
        #expect(result.status == 1, "a 404 among the jobs: \(result.stderr)")
        for key in ["image-a", "entry-gone"] {
            let record = try JSONParser.parse(try String(contentsOfFile: "\(w.root)/hooks/\(key).json", encoding: .utf8))
            #expect(record == (try w.record(key)), "\(key): the record on stdin")
        }
        let image = try String(contentsOfFile: "\(w.root)/hooks/image-a.env", encoding: .utf8)
        let output = try #require(try w.record("image-a")["output"]?.stringValue)
        #expect(image == "image|succeeded|\(w.base)/images/png.png|\(w.root)/out/\(output)\n")
        let gone = try String(contentsOfFile: "\(w.root)/hooks/entry-gone.env", encoding: .utf8)
        #expect(gone == "entry|notFound|\(w.base)/entries/missing.json|\n", "no payload: RUNNER_OUTPUT empty")
    }

    /// The runner's secrets stay with it: a hook gets no PGPASSWORD, PGPASSFILE or RUNNER_QUEUE,
    /// nor any variable that holds the queue's URL, whatever the runner was started with; the
    /// rest of the environment is passed on.
    @Test func aHookGetsNoneOfTheRunnersSecrets() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", #"{"kind": "image", "key": "image-a", "url": "\#(w.base)/images/png.png"}"# + "\n")
        let url = "postgresql://runner:pw-in-url@/jobs?host=/nowhere"
        let result = try await w.run(
            ["run", "jobs.jsonl", "--on-finish", "env > hook.env"],
            environment: [
                "PGPASSWORD": "hunter2-secret", "PGPASSFILE": "/somewhere/pgpass", "RUNNER_QUEUE": url, "MY_COPY_OF_THE_URL": url,
                "KEPT_FOR_THE_HOOK": "yes",
            ])
        #expect(result.status == 0, "\(result.stderr)")
        let environment = try String(contentsOfFile: "\(w.root)/hook.env", encoding: .utf8)
        for secret in ["PGPASSWORD", "PGPASSFILE", "RUNNER_QUEUE=", "hunter2-secret", "pw-in-url"] {
            #expect(!environment.contains(secret), "\(secret) reached the hook")
        }
        #expect(environment.contains("KEPT_FOR_THE_HOOK=yes") && environment.contains("RUNNER_KEY=image-a"), "\(environment)")
    }

    @Test func aFailingOrHangingHookIsReportedAndChangesNoStatusAndNoExitCode() async throws {
        let w = try Workspace()
        w.write("jobs.jsonl", """
            {"kind": "image", "key": "fails", "url": "\(w.base)/images/png.png?n=1"}
            {"kind": "image", "key": "hangs", "url": "\(w.base)/images/png.png?n=2"}
            """)
        let hook = #"if [ "$RUNNER_KEY" = fails ]; then echo "no thumbnail" >&2; exit 3; fi; sleep 300 & echo $! > hang.pid; wait"#
        let started = ContinuousClock.now
        let result = try await w.run([
            "run", "jobs.jsonl", "--on-finish", hook, "--hook-timeout", "1", "--events", "events.jsonl", "--metrics", "metrics.prom",
        ])
        #expect(started.duration(to: .now) < .seconds(20))
        #expect(result.status == 0, "the jobs succeeded: \(result.stderr)")
        #expect(try w.status("fails") == "succeeded" && w.status("hangs") == "succeeded")
        #expect(result.stderr.contains("fails: on-finish: no thumbnail"), "\(result.stderr)")
        #expect(result.stderr.contains("runner: the --on-finish hook for fails exited 3: no thumbnail"), "\(result.stderr)")
        #expect(result.stderr.contains("runner: the --on-finish hook for hangs did not end within 1 s; its process group was killed"))
        #expect(result.stderr.contains("runner: 2 --on-finish hooks failed"))
        // Also in the event stream and the metrics.
        let events = try String(contentsOfFile: "\(w.root)/events.jsonl", encoding: .utf8).split(separator: "\n")
            .map { try JSONParser.parse(String($0)) }.filter { $0["event"]?.stringValue == "hook" }
        #expect(Set(events.compactMap { $0["key"]?.stringValue }) == ["fails", "hangs"])
        #expect(events.allSatisfy { $0["error"]?.stringValue?.hasPrefix("the --on-finish hook for ") == true })
        let metrics = try String(contentsOfFile: "\(w.root)/metrics.prom", encoding: .utf8)
        #expect(metrics.contains("\nrunner_hook_failures_total 2\n"), "\(metrics)")
        let pid = try #require(pid_t(try String(contentsOfFile: "\(w.root)/hang.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        var alive = ExecutableKindTests.alive(pid)
        for _ in 0..<100 where alive {
            try await Task.sleep(for: .milliseconds(20))
            alive = ExecutableKindTests.alive(pid)
        }
        #expect(!alive, "what the hook started was killed with its group")
    }

    @Test func noMoreHooksRunAtOnceThanAsked() async throws {
        let w = try Workspace()
        let jobs = (1...6).map { #"{"kind": "image", "key": "k\#($0)", "url": "\#(w.base)/images/png.png?n=\#($0)"}"# }
        w.write("jobs.jsonl", jobs.joined(separator: "\n"))
        // Each hook notes when it starts and ends, in nanoseconds.
        let hook = #"echo "start $(date +%s%N)" >> spans.log; sleep 0.3; echo "end $(date +%s%N)" >> spans.log"#
        let result = try await w.run(["run", "jobs.jsonl", "--on-finish", hook, "--hook-concurrency", "2"])
        #expect(result.status == 0, "\(result.stderr)")
        let marks = try String(contentsOfFile: "\(w.root)/spans.log", encoding: .utf8).split(separator: "\n").map { line in
            let parts = line.split(separator: " ")
            return (start: parts[0] == "start", at: Int(parts[1]) ?? 0)
        }.sorted { $0.at < $1.at }
        #expect(marks.count == 12, "six hooks, each started and ended")
        var running = 0, most = 0
        for mark in marks {
            running += mark.start ? 1 : -1
            most = max(most, running)
        }
        #expect(most == 2, "at most --hook-concurrency at once, and that many used: \(most)")
    }

    /// A watcher killed while a job's hook ran: the hook dies with it; after a restart the file
    /// runs again, but the job that had ended does not: its hook runs with its own record.
    @Test func aHookAWatcherKilledBeforeItRanRunsAfterRestart() async throws {
        let s = try SpoolWorld()
        // The first watcher's hook never ends (it notes its pid); the watcher is killed meanwhile.
        let stuck = try s.startWatcher(["--on-finish", #"echo $$ > stuck.pid; exec sleep 300"#], name: "first")
        try s.drop("a.jsonl", s.imageJob("image:a"))
        let pidFile = "\(s.w.root)/stuck.pid"
        #expect(await s.wait(upTo: .seconds(20)) { ExecutableKindTests.writtenPid(atPath: pidFile) != nil }, "\(s.log("first"))")
        let pid = try #require(ExecutableKindTests.writtenPid(atPath: pidFile))
        kill(stuck.processIdentifier, SIGKILL)
        _ = await s.exit(of: stuck, upTo: .seconds(5))
        // The hook dies with its watcher, though the watcher could do nothing about it.
        var alive = ExecutableKindTests.alive(pid)
        for _ in 0..<250 where alive {
            try await Task.sleep(for: .milliseconds(20))
            alive = ExecutableKindTests.alive(pid)
        }
        #expect(!alive, "the hook outlived its watcher")
        if alive { kill(pid, SIGKILL) }
        #expect(!s.names(s.spool.done).contains("a.jsonl"), "not done while its hook had not ended")

        let second = try s.startWatcher(["--on-finish", #"echo "$RUNNER_KEY $RUNNER_STATUS" >> ran.log"#], name: "second")
        defer { if second.isRunning { second.terminate() } }
        #expect(await s.wait(upTo: .seconds(20)) { s.names(s.spool.done).contains("a.jsonl") }, "\(s.log("second"))")
        let ran = (try? String(contentsOfFile: "\(s.w.root)/ran.log", encoding: .utf8)) ?? ""
        #expect(ran == "image:a succeeded\n", "the hook ran after the restart, with the job's own status: \(ran)")
        #expect(s.w.server.arrivals(pathPrefix: "/images/").count == 1, "the job that had ended did not run again")
        let results = (try? String(contentsOfFile: "\(s.spool.done)/a.jsonl\(Spool.resultsSuffix)", encoding: .utf8)) ?? ""
        #expect(results.contains(#""key":"image:a""#) && results.contains(#""status":"succeeded""#), "its record beside the file: \(results)")
        kill(second.processIdentifier, SIGTERM)
        #expect(await s.exit(of: second, upTo: .seconds(20)) == 0)
    }
}

