import Foundation
import Testing

/// How a suite shares the machine with the others while the suites run in parallel (`swift test`
/// runs every suite at once, on a pool as wide as the machine has cores):
///
/// - `.measuresRealTime`: its tests assert on durations (a deadline ends near 2 s, a rate
///   holds, a watchdog is fed on time); it runs while no other suite marked here runs, so
///   that what it measures is the product, not the other tests. Mark it `.serialized` too.
///   Keep these few: they run one at a time, after the suites that start processes.
/// - `.startsProcesses`: its tests start the runner and servers, each with deadlines of its
///   own, and wait for them with generous timeouts; a few such suites run at once (twice as
///   many as there are cores), never beside a suite that measures real time.
///
/// A suite with neither (in-process, on the test clock) runs beside anything. The wait for the
/// machine happens before the suite's first test starts, outside every test's time limit.
public struct MachineShareTrait: SuiteTrait, TestScoping {
    let alone: Bool

    public var isRecursive: Bool { false }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        test.isSuite && testCase == nil ? self : nil
    }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        await MachineShare.shared.acquire(alone: alone)
        do {
            try await function()
        } catch {
            await MachineShare.shared.release(alone: alone)
            throw error
        }
        await MachineShare.shared.release(alone: alone)
    }
}

extension Trait where Self == MachineShareTrait {
    /// The suite runs alone among the suites that start processes or measure time.
    public static var measuresRealTime: Self { MachineShareTrait(alone: true) }
    /// The suite runs beside a few others that start processes, never beside one that measures time.
    public static var startsProcesses: Self { MachineShareTrait(alone: false) }
}

/// A readers-writer queue that lets the readers go first: suites that start processes share it
/// (up to `width` at once), and a suite that measures real time holds it alone once none of
/// them runs or waits. First come, first served within each kind.
///
/// Readers first, because a suite that measures time waiting in line behind a long suite that
/// starts processes held back every suite that came after it: the machine ran one suite at a
/// time for minutes. This way the suites that start processes run side by side from the start,
/// and those that measure time run one after another at the end, on a machine the others have
/// left (the in-process suites are through by then too). A suite that measures time and comes
/// before any that starts processes still goes at once.
actor MachineShare {
    static let shared = MachineShare(width: max(2, 2 * ProcessInfo.processInfo.activeProcessorCount))

    private let width: Int
    private var sharing = 0
    private var alone = false
    private var waitingToShare: [CheckedContinuation<Void, Never>] = []
    private var waitingAlone: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { self.width = width }

    func acquire(alone wantsAlone: Bool) async {
        if wantsAlone {
            if canTakeAlone {
                alone = true
                return
            }
            await withCheckedContinuation { waitingAlone.append($0) }
        } else {
            if !alone && sharing < width {
                sharing += 1
                return
            }
            await withCheckedContinuation { waitingToShare.append($0) }
        }
    }

    func release(alone wasAlone: Bool) {
        if wasAlone { alone = false } else { sharing -= 1 }
        while !alone && sharing < width && !waitingToShare.isEmpty {
            sharing += 1
            waitingToShare.removeFirst().resume()
        }
        if canTakeAlone && !waitingAlone.isEmpty {
            alone = true
            waitingAlone.removeFirst().resume()
        }
    }

    private var canTakeAlone: Bool { !alone && sharing == 0 && waitingToShare.isEmpty }
}
