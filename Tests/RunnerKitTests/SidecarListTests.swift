import Foundation
@testable import RunnerKit
import Synchronization
import Testing

/// A store held alone reads which sidecars of kept partials a payload folder holds once jobs
/// looked there a few times, and keeps that list up to date with the sidecars it writes, so a
/// job with none makes no system call to learn it; every sidecar that matters is still found.
@Suite struct SidecarListTests {
    let folder = TemporaryFolder()

    func download(_ key: String, in folder: String = "files") -> PartialDownload {
        PartialDownload(folder: folder, key: key, url: URL(string: "http://h.example/\(key)")!)
    }

    /// Looks in `folder` for sidecars of keys that have none until the store lists the folder.
    func lookUntilListed(_ store: OutputStore, in folder: String = "files") {
        for index in 0..<OutputStore.sidecarLooksBeforeListing {
            #expect(!download("file:none\(index)", in: folder).hasSidecar(store: store))
        }
        #expect(store.sidecars.withLock { if case .listed? = $0?[folder] { true } else { false } }, "listed after the looks")
    }

    /// A sidecar an earlier run left is on the folder's list, read once jobs looked there enough.
    @Test func aSidecarOnDiskBeforeTheFirstLookIsFound() throws {
        let store = try OutputStore(root: folder.path + "/out")
        let kept = download("file:kept")
        try store.write([1], to: "files/" + kept.sidecarName)
        store.listsSidecars()
        lookUntilListed(store)
        lookUntilListed(store, in: "")
        #expect(kept.hasSidecar(store: store))
        #expect(store.sidecars.withLock { $0?["files"] } == .listed([kept.name]))
    }

    /// A sidecar written after the folder was read (an attempt cut in this run, resumed by the
    /// next attempt) is found too, in a folder read before and in one not read yet.
    @Test func aSidecarWrittenAfterTheFolderWasListedIsFound() throws {
        let store = try OutputStore(root: folder.path + "/out")
        store.listsSidecars()
        lookUntilListed(store)
        let cut = download("file:cut")
        #expect(!cut.hasSidecar(store: store))
        cut.writeSidecar(store: store, bytes: 2 << 20, inode: 1, validator: .etag("\"v1\""), total: nil)
        #expect(cut.hasSidecar(store: store))
        let elsewhere = download("file:cut", in: "other")
        elsewhere.writeSidecar(store: store, bytes: 2 << 20, inode: 1, validator: .etag("\"v1\""), total: nil)
        #expect(elsewhere.hasSidecar(store: store))
    }

    /// A sidecar another process wrote before the folder was listed is found by a look on disk
    /// (a short run in a large folder never reads the folder).
    @Test func beforeTheListEachLookAsksTheFolder() throws {
        let store = try OutputStore(root: folder.path + "/out")
        store.listsSidecars()
        let other = download("file:other")
        #expect(!other.hasSidecar(store: store))
        try store.write([1], to: "files/" + other.sidecarName)
        #expect(other.hasSidecar(store: store))
        #expect(store.sidecars.withLock { $0?["files"] } == .looked(2))
    }

    /// Without the list (a store shared with other processes: watchers), every look asks the
    /// folder, so a sidecar another process wrote at any time is found.
    @Test func withoutTheListEveryLookAsksTheFolder() throws {
        let store = try OutputStore(root: folder.path + "/out")
        let other = download("file:other")
        #expect(!other.hasSidecar(store: store))
        try store.write([1], to: "files/" + other.sidecarName)
        #expect(other.hasSidecar(store: store))
        #expect(store.sidecars.withLock { $0 } == nil)
    }
}
