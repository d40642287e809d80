import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// A FILE of `-` is standard input for `run`, `validate` and `submit`, JSON or JSON Lines by content.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct StandardInputTests {
    @Test func runReadsJSONLinesFromStandardInput() async throws {
        let w = try Workspace()
        let lines = (1...3).map { #"{"kind": "image", "key": "image:\#($0)", "url": "\#(w.base)/images/png.png?n=\#($0)"}"# }
        let result = try await w.run(["run", "-"], input: Array((lines.joined(separator: "\n") + "\n").utf8))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        for n in 1...3 { #expect(try w.status("image:\(n)") == "succeeded") }
        #expect(w.server.requestCount(path: "/images/png.png") == 3)
    }

    @Test func runReadsAPrettyPrintedBatchFromStandardInput() async throws {
        let w = try Workspace()
        let batch = """
            {
              "defaults": {"kind": "image"},
              "jobs": [
                {"key": "image:a", "url": "\(w.base)/images/png.png?a"},
                {"key": "image:b", "url": "\(w.base)/images/gif.gif"}
              ]
            }
            """
        let result = try await w.run(["run", "-", "--json"], input: Array(batch.utf8))
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 2)
        #expect(try w.status("image:b") == "succeeded")
    }

    /// More jobs than `run` keeps after validating: the run reads the copy of stdin a second time.
    @Test func aLongStreamOnStandardInputRunsEveryJob() async throws {
        let w = try Workspace()
        let count = 10_050
        var text = #"{"defaults": {"kind": "image", "url": "\#(w.base)/images/png.png"}}"# + "\n"
        for n in 0..<count { text += #"{"key": "k\#(n)", "output": "i/\#(n).png"}"# + "\n" }
        let result = try await w.run(["run", "-", "--concurrency", "32", "--per-host", "32", "--json"], input: Array(text.utf8))
        #expect(result.status == 0, "stderr: \(result.stderr.prefix(500))")
        #expect(result.stdout.split(separator: "\n").count == count)
    }

    @Test func errorsNameStandardInputAndNothingRuns() async throws {
        let w = try Workspace()
        let text = #"{"kind": "image", "url": "\#(w.base)/images/png.png"}"# + "\n" + #"{"kind": "image", "url": "\#(w.base)/x.png", "bogus": 1}"# + "\n"
        for command in ["run", "validate", "submit"] {
            let result = try await w.run([command, "-"], input: Array(text.utf8))
            #expect(result.status == 2, "\(command)")
            #expect(result.stderr.hasPrefix("Error: (stdin): line 2: field 'bogus' is not a field of kind 'image'"), "\(command): \(result.stderr)")
        }
        #expect(w.server.totalRequests == 0)
        let empty = try await w.run(["validate", "-"], input: [])
        #expect(empty.stderr.hasPrefix("Error: (stdin): is empty"), "\(empty.stderr)")
        let twice = try await w.run(["validate", "-", "-"], input: Array(text.utf8))
        #expect(twice.status == 2)
        #expect(twice.stderr.hasPrefix("Error: '-' (standard input) may be given once"), "\(twice.stderr)")
    }

    @Test func validateCountsTheJobsOfStandardInput() async throws {
        let w = try Workspace()
        let oneLineJob = #"{"kind": "image", "url": "http://h/a.png"}"#
        let single = try await w.run(["validate", "-"], input: Array(oneLineJob.utf8))
        #expect(single.stdout == "(stdin): 1 job, valid\n", "\(single.stderr)")
        let array = try await w.run(["validate", "-"], input: Array("[\n \(oneLineJob),\n \(oneLineJob)\n]\n".utf8))
        #expect(array.stdout == "(stdin): 2 jobs, valid\n", "\(array.stderr)")
    }

    @Test func submitQueuesStandardInputAsAFileOfItsKind() async throws {
        let w = try Workspace()
        let lines = #"{"kind": "image", "url": "http://h/a.png"}"# + "\n" + #"{"kind": "image", "url": "http://h/b.png"}"# + "\n"
        // A temporary folder of the test's own, so that what another process left elsewhere counts for nothing.
        let temporary = "\(w.root)/tmp"
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let result = try await RunnerBinary.runExecutable(
            RunnerBinary.path, ["submit", "-"], in: w.root, input: Array(lines.utf8), environment: ["TMPDIR": temporary])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout == "queued (stdin) as spool/inbox/stdin.jsonl (2 jobs)\n")
        #expect(FileManager.default.contents(atPath: "\(w.root)/spool/inbox/stdin.jsonl") == Data(lines.utf8))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: temporary)
        #expect(leftovers.isEmpty, "the copy of stdin is removed: \(leftovers)")
    }
}
