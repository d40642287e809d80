import Foundation
import Glibc
import RunnerKit
import RunnerTestSupport
import Testing

/// `run` and `watch` with the options that bound what a job or a server can make the runner do.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct TrustOptionsTests {
    @Test func runRefusesAJobAskingMoreThanTheCapsAndRunsNothing() async throws {
        let w = try Workspace()
        w.write("big.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "big", "url": "\#(w.base)/entries/{id}.json", "maxBytes": 2000000}"#)
        let result = try await w.run(["run", "big.json", "--max-bytes", "1000000"])
        #expect(result.status == 2)
        #expect(result.stderr.contains("big.json: field 'maxBytes' asks for 2000000 bytes, more than this runner allows (1000000, set by --max-bytes)"), "\(result.stderr)")
        #expect(w.outputFiles().isEmpty)
    }

    @Test(arguments: ["curl", "urlsession"])
    func runWithDenyPrivateFailsALoopbackJobNamingTheRule(http: String) async throws {
        let w = try Workspace()
        w.write("one.json", #"{"kind": "entry", "id": "imgly.A.1", "key": "one", "url": "\#(w.base)/entries/{id}.json"}"#)
        let refused = try await w.run(["run", "one.json", "--deny-private", "--http", http])
        #expect(refused.status == 4)
        let record = try w.record("one")
        #expect(record["status"] == .string("failed"))
        #expect(record["error"]?.stringValue?.hasSuffix("a loopback address, refused by --deny-private") == true, "\(record)")
        let allowed = try await w.run(["run", "one.json", "--deny-private", "--allow-host", "127.0.0.1", "--http", http])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(try w.status("one") == "succeeded")
    }

    @Test func badPatternsAndCapsAreUsageErrors() async throws {
        let w = try Workspace()
        w.write("one.json", #"{"kind": "entry", "id": "x", "url": "\#(w.base)/entries/{id}.json"}"#)
        let pattern = try await w.run(["run", "one.json", "--allow-host", "10.0.0.0/40"])
        #expect(pattern.status == 2)
        #expect(pattern.stderr.contains("--allow-host: invalid host pattern '10.0.0.0/40': the prefix length must be a number from 0 to 32"), "\(pattern.stderr)")
        let cap = try await w.run(["watch", "--max-timeout", "0"])
        #expect(cap.status == 2)
        #expect(cap.stderr.contains("--max-timeout must be a number of seconds"), "\(cap.stderr)")
        let help = try await w.run(["watch", "--help"])
        for option in ["--allow-host PATTERN", "--deny-private", "--max-bytes N", "--max-timeout SECONDS", "--max-retries N"] {
            #expect(help.stdout.contains(option), "\(option)")
        }
    }

    @Test func watchRefusesAFileWhoseJobAsksMoreAndFailsALoopbackJobUnderDenyPrivate() async throws {
        let world = try SpoolWorld()
        let watcher = try world.startWatcher(["--max-retries", "1", "--deny-private"])
        defer { if watcher.isRunning { kill(watcher.processIdentifier, SIGKILL) } }
        try world.drop("greedy.json", #"{"kind": "entry", "id": "a", "key": "greedy", "url": "\#(world.base)/entries/{id}.json", "retries": 5}"#)
        try world.drop("local.json", #"{"kind": "entry", "id": "b", "key": "local", "url": "\#(world.base)/entries/{id}.json", "retries": 1}"#)
        let settled = await world.wait(upTo: .seconds(20)) { world.jobFiles(world.spool.failed).count == 2 }
        #expect(settled, "failed/: \(world.names(world.spool.failed)); log: \(world.log())")
        let reason = world.text("\(world.spool.failed)/greedy.json\(Spool.errorSuffix)")
        #expect(reason.contains("field 'retries' asks for 5 retries, more than this runner allows (1, set by --max-retries)"), "\(reason)")
        let local = world.records(world.spool.failed, "local.json").first
        #expect(local?["status"] == .string("failed"))
        #expect(local?["error"]?.stringValue?.hasSuffix("a loopback address, refused by --deny-private") == true, "\(String(describing: local))")
        kill(watcher.processIdentifier, SIGTERM)
        #expect(await world.exit(of: watcher, upTo: .seconds(20)) == 0)
    }
}
