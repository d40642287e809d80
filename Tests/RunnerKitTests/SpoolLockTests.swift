import Foundation
import Glibc
@testable import RunnerKit
import Testing

/// The spool's locks and names, in process: the per-key flock, the engine's hook, watcher folders.
@Suite(.timeLimit(.minutes(1)))
struct SpoolLockTests {
    @Test func aKeyLockIsExclusiveNamesItsHolderAndLeavesNoFileBehind() throws {
        let folder = TemporaryFolder()
        let spool = Spool(root: folder.path + "/spool")
        try spool.makeFolders()
        let lock = SpoolKeyLock(spool: spool)

        let release = try #require(lock.lock(key: "image:a b").release)
        #expect(lock.lock(key: "image:a b").release == nil, "a second open file description cannot take it")
        let other = try #require(lock.lock(key: "image:other").release, "other keys are free")
        let held = lock.held()
        #expect(Set(held.map(\.key)) == ["image:a b", "image:other"])
        #expect(held.allSatisfy { $0.pid == Int(getpid()) })

        release()
        other()
        #expect(FileSystem.names(in: spool.locks).isEmpty, "a released lock removes its file")
        let again = try #require(lock.lock(key: "image:a b").release)
        again()
    }

    @Test func theEngineEndsAJobDuplicateWhenAnotherProcessHoldsItsKey() async throws {
        struct HeldElsewhere: KeyLocking {
            func lock(key: String) -> KeyLockOutcome {
                key == "probe:busy" ? .heldElsewhere : .acquired(release: {})
            }
        }
        let folder = TemporaryFolder()
        let store = try OutputStore(root: folder.path)
        let engine = try JobEngine(configuration: .init(store: store, http: NoFetching()).with { $0.keyLock = HeldElsewhere() })
        let url = URL(string: "http://127.0.0.1/x")!
        let busy = await engine.run(JobDescriptor(ProbeKind(), key: "probe:busy", url: url))
        #expect(busy.status == .duplicate)
        #expect(busy.error == "a task with the key 'probe:busy' is already running in another process or engine")
        #expect(store.readRecord(forKey: "probe:busy") == nil, "the record of the running task is not overwritten")
        let free = await engine.run(JobDescriptor(ProbeKind(), key: "probe:free", url: url))
        #expect(free.status == .succeeded)
        #expect(!engine.taskManager.isRunning(key: "probe:busy"), "a refused key leaves the TaskManager")
    }

    @Test func recoveryTakesBackOnlyTheFilesOfDeadWatchersAndTheirRecordsNeverPassThroughInbox() throws {
        let folder = TemporaryFolder()
        let spool = Spool(root: folder.path + "/spool")
        let live = try WatcherLease(spool: spool)
        defer { live.end() }
        folder.write("spool/active/\(live.id)/mine.json", "{}")
        // A dead watcher's folder, as a watcher makes it (0700): a file whose jobs partly ended,
        // and one none of whose jobs ended.
        try FileManager.default.createDirectory(atPath: spool.active + "/4242-dead", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        folder.write("spool/active/4242-dead/lost.json", "{}")
        folder.write("spool/active/4242-dead/.lost.json.results.jsonl", #"{"key":"k","status":"succeeded"}"# + "\n")
        folder.write("spool/active/4242-dead/fresh.json", "{}")
        folder.write("spool/inbox/lost.json", "{}")
        // A folder a producer made (open to its group): its records are a forgery.
        try FileManager.default.createDirectory(atPath: spool.active + "/666-forged", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o770])
        folder.write("spool/active/666-forged/planted.json", "{}")
        folder.write("spool/active/666-forged/.planted.json.results.jsonl", #"{"key":"p","status":"succeeded"}"# + "\n")
        // A replay file a producer dropped in inbox/ is never read.
        folder.write("spool/inbox/.lost.json.replay.jsonl", #"{"key":"k","status":"succeeded","output":"../x"}"# + "\n")

        let recovered = WatcherLease.recover(spool: spool, into: live)
        #expect(recovered.returned.sorted() == ["fresh.json", "planted.json"], "\(recovered.returned)")
        #expect(recovered.adopted == ["lost.json"], "\(recovered.adopted)")
        #expect(recovered.refused.count == 1 && recovered.refused[0].hasPrefix("planted.json: records in "), "\(recovered.refused)")
        #expect(FileSystem.names(in: spool.inbox).sorted() == [".lost.json.replay.jsonl", "fresh.json", "lost.json", "planted.json"])
        let replay = try String(contentsOfFile: "\(live.folder)/.lost.json.replay.jsonl", encoding: .utf8)
        #expect(replay == #"{"key":"k","status":"succeeded"}"# + "\n", "the records of its ended jobs come with it, into the live watcher's folder")
        #expect(FileSystem.names(in: spool.active) == [live.id], "the dead folders are gone, the live one stays")
        #expect(FileSystem.names(in: live.folder).sorted() == [".lost.json.replay.jsonl", "lost.json", "mine.json"])
        #expect(WatcherLease.isAlive(spool: spool, folder: live.id))
    }

    @Test func numberedNamesKeepTheExtension() {
        #expect(FileSystem.numbered("batch.jsonl", 1) == "batch.jsonl")
        #expect(FileSystem.numbered("batch.jsonl", 3) == "batch-3.jsonl")
        #expect(FileSystem.numbered("README", 2) == "README-2")
        #expect(FileSystem.numbered(".hidden", 2) == ".hidden-2")
    }
}

/// A fetcher for jobs that never fetch.
private struct NoFetching: HTTPFetching {
    struct Unused: Error {}
    func fetch(_ request: FetchRequest, into body: any BodySink) async throws -> FetchResponseHead { throw Unused() }
}

extension KeyLockOutcome {
    /// What releases the lock, when it was taken (nil: held elsewhere, or unavailable).
    var release: (@Sendable () -> Void)? {
        if case .acquired(let release) = self { return release }
        return nil
    }
}
