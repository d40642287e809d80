import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// When `--per-host` held jobs back for a noticeable share of a run, the summary says so.
@Suite(.measuresRealTime, .serialized, .timeLimit(.minutes(2)))
struct HostWaitTests {
    /// 8 jobs of 200 ms to one host, one at a time: they wait 0.2 × (0 + 1 + … + 7) = 5.6 s in
    /// all against 1.6 s of holding the slot, a share near 78%.
    @Test func aRunHeldBackByPerHostSaysSoAndNamesTheOption() async throws {
        let w = try Workspace()
        let jobs = (1...8).map { #"{"kind": "image", "key": "slow:\#($0)", "url": "\#(w.base)/images/png.png?delay=200&n=\#($0)"}"# }
        w.write("slow.jsonl", jobs.joined(separator: "\n"))
        let held = try await w.run(["run", "slow.jsonl", "--per-host", "1"])
        #expect(held.status == 0, "stderr: \(held.stderr)")
        let line = try #require(held.stdout.split(separator: "\n").first { $0.hasPrefix("Jobs waited ") }, "\(held.stdout)")
        #expect(line.contains("per-host slot (most for 127.0.0.1)"))
        #expect(line.contains("--per-host 1 held them back; raise --per-host to run more at once."))
        let share = try #require(line.firstMatch(of: /, (\d+)% of their time at hosts/).flatMap { Int($0.1) })
        #expect((60...90).contains(share), "\(line)")

        // MS is each job's own time (about 200 ms); WAIT, apart, the time it waited for the slot.
        let table = held.stdout.split(separator: "\n")
        #expect(table.first?.contains("MS   WAIT") == true, "\(held.stdout)")
        let rows = table.filter { $0.hasPrefix("succeeded") }.map { $0.split(separator: " ") }
        #expect(rows.count == 8)
        for row in rows {
            let own = try #require(Int(row[4])), wait = try #require(Int(row[5]))
            #expect(own >= 150 && own < 2000, "\(row)")
            #expect(wait >= 0 && wait < 5000, "7 × 200 ms at most, unloaded: \(row)")
        }
        let owns = rows.map { Int($0[4]) ?? 0 }, waits = rows.map { Int($0[5]) ?? 0 }
        #expect(waits.reduce(0, +) > 3000, "0.2 × (0 + 1 + … + 7) s waited in all")
        // Each wait is the slot time of the jobs before it, so the waits add up to far more than
        // the own times; an MS that took the wait in would add up to more than the waits.
        #expect(owns.reduce(0, +) < waits.reduce(0, +), "MS leaves the wait out: \(owns) \(waits)")
        let slowest = try #require(table.first { $0.hasPrefix("Slowest: ") })
        let slowestMs = slowest.matches(of: /(\d+) ms/).compactMap { Int($0.1) }
        #expect(slowestMs.count == 5 && slowestMs.allSatisfy { owns.contains($0) }, "own times, not waits: \(slowest), MS \(owns)")

        let json = try await w.run(["run", "slow.jsonl", "--per-host", "1", "--json"])
        #expect(json.stderr.contains("runner: Jobs waited "), "in --json mode the line goes to stderr")
        #expect(json.stderr.contains("runner: 8 jobs: 8 notModified."), "the counts go to stderr too: \(json.stderr)")
        let records = try json.stdout.split(separator: "\n").map { try JSONParser.parse(String($0)) }
        #expect(records.count == 8, "standard output holds records only")
        let waited = records.compactMap { $0["waitedForHostMs"]?.intValue }
        #expect(waited.count >= 6 && waited.reduce(0, +) > 3000, "\(waited)")
    }

    @Test func aRunNotHeldBackSaysNothing() async throws {
        let w = try Workspace()
        let jobs = (1...8).map { #"{"kind": "image", "key": "slow:\#($0)", "url": "\#(w.base)/images/png.png?delay=200&n=\#($0)"}"# }
        w.write("slow.jsonl", jobs.joined(separator: "\n"))
        let free = try await w.run(["run", "slow.jsonl"])
        #expect(free.status == 0, "stderr: \(free.stderr)")
        #expect(!free.stdout.contains("per-host"), "\(free.stdout)")
    }

    @Test func hostLimiterSumsWaitsAndHolds() async throws {
        let hosts = HostLimiter(limit: 1)
        let slot = hosts.limiter(for: "Example.org")
        try await slot.acquire()
        let waiter = Task {
            try await hosts.limiter(for: "example.org").acquire()
            hosts.limiter(for: "example.org").release()
        }
        // In line before the 300 ms begin, however late the task starts.
        await eventually("the waiter in line (have \(slot.waiting))") { slot.waiting == 1 }
        try await Task.sleep(for: .milliseconds(300))
        slot.release()
        try await waiter.value
        let waits = hosts.waits
        #expect(waits.busiestHost == "example.org")
        #expect(waits.waited >= .milliseconds(300) && waits.waited < .seconds(2), "\(waits.waited)")
        #expect(waits.held >= .milliseconds(300), "\(waits.held)")
        // The slot was held all the time the waiter waited, and before it joined the line: a
        // share just under one half, less the later the waiter's task started.
        #expect(waits.share > 0.1 && waits.share <= 0.5, "\(waits.share)")
    }
}
