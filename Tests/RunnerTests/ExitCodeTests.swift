import FixtureServer
import Foundation
import RunnerKit
import RunnerTestSupport
import Testing

/// What cron reads: the exit code and the summary of a run with a parent and its children.
@Suite(.startsProcesses, .timeLimit(.minutes(2)))
struct ExitCodeTests {
    /// A list whose children the test chooses: `/list/N` with each image's query.
    static func list(_ w: Workspace, key: String = "catalog", count: Int, image query: String = "") -> String {
        let encoded = query.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        return #"{"kind": "image-list", "key": "\#(key)", "url": "\#(w.base)/list/\#(count)?image=\#(encoded)", "timeout": 20}"#
    }

    @Test func aParentFetchedWellSucceedsWhateverItsChildrenDidAndTheSummaryCountsEveryJob() async throws {
        let w = try Workspace()
        w.write("night.json", Self.list(w, count: 3, image: "status=500"))
        let night = try await w.run(["run", "night.json"])
        #expect(night.status == 1, "some failed, one top-level succeeded: \(night.stderr)")
        #expect(try w.status("catalog") == "succeeded", "its own fetch's status")
        let children = try w.record("catalog")["details"]?["children"]
        #expect(children?["failed"]?.intValue == 3, "\(String(describing: children))")
        #expect(night.stdout.contains("4 jobs: 1 succeeded, 3 failed."), "\(night.stdout)")

        let allowed = try await w.run(["run", "night.json", "--max-failed", "3"])
        #expect(allowed.status == 0, "at most 3 failures: \(allowed.stdout)")
        #expect(allowed.stdout.contains("3 failed"), "still reported")
        #expect(try await w.run(["run", "night.json", "--max-failed", "75%"]).status == 0, "3 of 4")
        #expect(try await w.run(["run", "night.json", "--max-failed", "50%"]).status == 1)
        let bad = try await w.run(["run", "night.json", "--max-failed", "lots"])
        #expect(bad.status == 2 && bad.stderr.contains("--max-failed must be a number of jobs"), "\(bad.stderr)")
    }

    @Test func aChildsNotFoundIsAnAnswerAndARefusedParentExits4() async throws {
        let w = try Workspace()
        // /images.json names one image that answers 404.
        w.write("images.json", #"{"kind": "image-list", "key": "images", "url": "\#(w.base)/images.json", "timeout": 20}"#)
        let good = try await w.run(["run", "images.json"])
        #expect(good.status == 0, "a child's notFound is no failure: \(good.stdout) \(good.stderr)")
        #expect(good.stdout.contains("1 notFound"), "\(good.stdout)")

        w.write("refused.json", #"{"kind": "entry", "key": "api", "id": "imgly.A.1", "url": "\#(w.base)/entries/{id}.json?status=401"}"#)
        let refused = try await w.run(["run", "refused.json"])
        #expect(refused.status == 4, "nothing was fetched: \(refused.stderr)")
        w.write("missing.json", #"{"kind": "entry", "key": "gone", "id": "nope", "url": "\#(w.base)/entries/{id}.json"}"#)
        #expect(try await w.run(["run", "missing.json"]).status == 4, "a top-level notFound is a failure")
        #expect(try await w.run(["run", "refused.json", "images.json"]).status == 1, "one top-level succeeded")
    }

    @Test func aParentIsRevalidatedAndFallsBackToStaleLikeAnyJob() async throws {
        let w = try Workspace()
        w.write("catalog.json", #"{"kind": "image-list", "key": "catalog", "url": "\#(w.base)/images.json", "timeout": 20}"#)
        #expect(try await w.run(["run", "catalog.json"]).status == 0)
        let first = try w.record("catalog")
        #expect(first["status"]?.stringValue == "succeeded" && first["validators"]?["etag"] != nil, "\(first)")
        let again = try await w.run(["run", "catalog.json"])
        #expect(again.status == 0)
        let revalidated = try w.record("catalog")
        #expect(revalidated["status"]?.stringValue == "notModified", "revalidated: \(revalidated)")
        // The API refuses: the parent fails, pointing at the good copy it has.
        w.write("catalog.json", #"{"kind": "image-list", "key": "catalog", "url": "\#(w.base)/images.json?status=401", "timeout": 20}"#)
        let refused = try await w.run(["run", "catalog.json"])
        #expect(refused.status == 4)
        let record = try w.record("catalog")
        #expect(record["status"]?.stringValue == "failed" && record["stale"] == .bool(true), "\(record)")
        #expect(record["output"]?.stringValue == first["output"]?.stringValue, "\(record)")
    }
}
