import Foundation
import Glibc
import Testing

@testable import RunnerKit

/// `prune` and `forget` walk the output directory by descriptor: a folder swapped for a link
/// while they walk is never followed, and nothing outside the directory is touched.
@Suite struct PruneWalkTests {
    let folder = TemporaryFolder()
    var out: String { folder.path + "/out" }
    var outside: String { folder.path + "/outside" }

    /// Files outside the output directory with the names of payloads in it, an hour old like them.
    func makeOutside(_ names: [String]) throws {
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        for name in names { age(folder.write("outside/" + name, "not the runner's")) }
    }

    /// Makes a file an hour old, so `prune` does not take it for a payload whose record is on its way.
    func age(_ path: String) {
        var times = [timespec(tv_sec: time(nil) - 3600, tv_nsec: 0), timespec(tv_sec: time(nil) - 3600, tv_nsec: 0)]
        utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
    }

    func outsideNames() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: outside)) ?? []).sorted() }

    /// Two unreferenced payloads in `fetched/`, an hour old.
    func makeStore() throws -> OutputStore {
        let store = try OutputStore(root: out)
        for name in ["a.bin", "b.bin"] {
            try store.write([1, 2, 3], to: "fetched/" + name)
            age(store.absolute("fetched/" + name))
        }
        return store
    }

    /// The folder is swapped for a link to the outside after its parent was listed and before the
    /// walk goes into it: the link is not followed.
    @Test func aFolderSwappedForALinkBeforeItIsEnteredIsNotFollowed() throws {
        let store = try makeStore()
        try makeOutside(["a.bin", "b.bin"])
        var swapped = false
        let pruned = store.prune(dryRun: false, minimumAge: 60) { listed in
            guard listed == "", !swapped else { return }
            swapped = rename(store.absolute("fetched"), folder.path + "/moved") == 0 && symlink(outside, store.absolute("fetched")) == 0
        }
        #expect(swapped)
        #expect(pruned.files.isEmpty, "\(pruned.files)")
        #expect(outsideNames() == ["a.bin", "b.bin"], "nothing outside the output directory is removed")
    }

    /// The folder is swapped for a link to the outside after it was listed and before its files
    /// are removed: the removals go through the descriptor of the folder that was listed (now
    /// moved away), never through the link at its old path.
    @Test func aFolderSwappedForALinkBetweenListingAndUnlinkingIsNotFollowed() throws {
        let store = try makeStore()
        try makeOutside(["a.bin", "b.bin"])
        var swapped = false
        let pruned = store.prune(dryRun: false, minimumAge: 60) { listed in
            guard listed == "fetched", !swapped else { return }
            swapped = rename(store.absolute("fetched"), store.absolute("moved")) == 0 && symlink(outside, store.absolute("fetched")) == 0
        }
        #expect(swapped)
        #expect(pruned.files == ["fetched/a.bin", "fetched/b.bin"], "\(pruned.files)")
        #expect(outsideNames() == ["a.bin", "b.bin"], "nothing outside the output directory is removed")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: store.absolute("moved"))) ?? ["?"]).isEmpty, "the listed files went")
    }

    /// A link planted where a payload folder is, and a link where a payload is: neither is
    /// followed, listed or removed, and `forget` of a record that names a path through the link
    /// removes nothing outside.
    @Test func aLinkPlantedInThePayloadFoldersIsNeitherFollowedNorRemoved() throws {
        let store = try makeStore()
        try makeOutside(["a.bin", "x.json"])
        #expect(symlink(outside, store.absolute("linked")) == 0)
        #expect(symlink(outside + "/a.bin", store.absolute("fetched/link.bin")) == 0)
        try store.write(Array(#"{"key": "planted", "status": "succeeded", "output": "linked/x.json"}"#.utf8), to: store.recordPath(forKey: "planted"))

        let pruned = store.prune(dryRun: false, minimumAge: 60)
        #expect(pruned.files == ["fetched/a.bin", "fetched/b.bin"], "\(pruned.files)")
        var info = stat()
        #expect(lstat(store.absolute("fetched/link.bin"), &info) == 0, "a link is not a payload: prune leaves it")

        let forgotten = try #require(store.forget(key: "planted"))
        #expect(forgotten.removed == [store.recordPath(forKey: "planted")], "\(forgotten.removed)")
        #expect(outsideNames() == ["a.bin", "x.json"], "nothing outside the output directory is removed")
    }

    /// `forget` removes the key's payload through its folder's descriptor: a payload folder that
    /// became a link to the outside is not gone through.
    @Test func forgetRemovesThePayloadAndNothingThroughALink() throws {
        let store = try OutputStore(root: out)
        try store.write([1], to: "fetched/mine.bin")
        try store.write(Array(#"{"key": "mine", "status": "succeeded", "output": "fetched/mine.bin"}"#.utf8), to: store.recordPath(forKey: "mine"))
        try store.write(Array(#"{"key": "theirs", "status": "succeeded", "output": "other/theirs.bin"}"#.utf8), to: store.recordPath(forKey: "theirs"))
        try makeOutside(["theirs.bin"])
        #expect(symlink(outside, store.absolute("other")) == 0)

        #expect(try #require(store.forget(key: "mine")).removed.sorted() == ["fetched/mine.bin", store.recordPath(forKey: "mine")])
        #expect(!store.fileExists("fetched/mine.bin"))
        #expect(try #require(store.forget(key: "theirs")).removed == [store.recordPath(forKey: "theirs")])
        #expect(outsideNames() == ["theirs.bin"])
    }

    /// A record that names no payload after an end that never gives one up (written so by a
    /// runner from before cancels kept pointing at the last good payload) keeps the payload the
    /// key's last good line in the run logs names; a 404's record does not.
    @Test func aRecordThatLostItsPayloadKeepsTheOneTheRunLogNames() throws {
        let store = try OutputStore(root: out)
        for name in ["kept.bin", "gone.bin", "renamed.bin"] {
            try store.write([7], to: "fetched/" + name)
            age(store.absolute("fetched/" + name))
        }
        let log = try RunLog(store: store, runID: "earlier")
        log.append(record: try JSONParser.parse(#"{"key": "lost", "status": "succeeded", "output": "fetched/kept.bin"}"#))
        log.append(record: try JSONParser.parse(#"{"key": "gone", "status": "succeeded", "output": "fetched/gone.bin"}"#))
        log.append(record: try JSONParser.parse(#"{"key": "other", "status": "failed", "output": "fetched/renamed.bin"}"#))
        try store.write(Array(#"{"key": "lost", "status": "cancelled", "output": null}"#.utf8), to: store.recordPath(forKey: "lost"))
        try store.write(Array(#"{"key": "gone", "status": "notFound", "output": null}"#.utf8), to: store.recordPath(forKey: "gone"))
        try store.write(Array(#"{"key": "other", "status": "failed", "output": null}"#.utf8), to: store.recordPath(forKey: "other"))

        let listed = store.prune(dryRun: true, minimumAge: 60)
        #expect(listed.files == ["fetched/gone.bin", "fetched/renamed.bin"], "\(listed.files)")
    }
}
