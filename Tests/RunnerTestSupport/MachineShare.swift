import Foundation
import Testing

/// How a suite shares the machine with the others while the suites run in parallel (`swift test`
/// runs every suite at once, on a pool as wide as the machine has cores):
///
/// - `.measuresRealTime`: its tests assert on durations (a deadline ends near 2 s, a rate
///   holds, a watchdog is fed on time); it runs while no other suite marked here runs, so
///   that what it measures is the product, not the other tests. Mark it `.serialized` too.
/// - `.startsProcesses`: its tests start the runner and servers, each with deadlines of its
///   own; a few such suites run at once (twice as many as there are cores), never beside a
///   suite that measures real time.
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

/// A fair readers-writer queue: suites that start processes share it (up to `width` at once),
/// a suite that measures real time holds it alone; first come, first served.
actor MachineShare {
    static let shared = MachineShare(width: max(2, 2 * ProcessInfo.processInfo.activeProcessorCount))

    private let width: Int
    private var sharing = 0
    private var alone = false
    private var waiting: [(alone: Bool, continuation: CheckedContinuation<Void, Never>)] = []

    init(width: Int) { self.width = width }

    func acquire(alone wantsAlone: Bool) async {
        if waiting.isEmpty && canTake(alone: wantsAlone) {
            take(alone: wantsAlone)
            return
        }
        await withCheckedContinuation { waiting.append((wantsAlone, $0)) }
    }

    func release(alone wasAlone: Bool) {
        if wasAlone { alone = false } else { sharing -= 1 }
        while let first = waiting.first, canTake(alone: first.alone) {
            waiting.removeFirst()
            take(alone: first.alone)
            first.continuation.resume()
        }
    }

    private func canTake(alone wantsAlone: Bool) -> Bool {
        wantsAlone ? !alone && sharing == 0 : !alone && sharing < width
    }

    private func take(alone takesAlone: Bool) {
        if takesAlone { alone = true } else { sharing += 1 }
    }
}
