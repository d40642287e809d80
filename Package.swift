// swift-tools-version: 6.0
import PackageDescription

let settings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "runner",
    // Linux only (Glibc, netlink, inotify): no `platforms` entry claims an Apple platform.
    products: [
        .library(name: "RunnerKit", targets: ["RunnerKit"]),
        .library(name: "RunnerKinds", targets: ["RunnerKinds"]),
        .library(name: "FixtureServer", targets: ["FixtureServer"]),
        // The test clock, the HTTP double and the scripted connectivity monitor, for tests of
        // programs that embed the engine.
        .library(name: "RunnerTesting", targets: ["RunnerTesting"]),
        .executable(name: "runner", targets: ["runner"]),
    ],
    targets: [
        .target(name: "RunnerKit", swiftSettings: settings),
        .target(name: "RunnerKinds", dependencies: ["RunnerKit"], swiftSettings: settings),
        .target(name: "FixtureServer", swiftSettings: settings),
        .target(name: "RunnerTesting", dependencies: ["RunnerKit"], swiftSettings: settings),
        .executableTarget(
            name: "runner",
            dependencies: ["RunnerKit", "RunnerKinds", "FixtureServer"],
            swiftSettings: settings
        ),
        // Doubles shared by the test targets (RunnerTesting's, re-exported, and a gate), the
        // processes they start, and how their suites share the machine when they run in parallel.
        .target(
            name: "RunnerTestSupport", dependencies: ["RunnerKit", "RunnerTesting"], path: "Tests/RunnerTestSupport",
            swiftSettings: settings
        ),
        .testTarget(name: "RunnerKitTests", dependencies: ["RunnerKit", "RunnerTestSupport"], swiftSettings: settings),
        .testTarget(
            name: "RunnerKindsTests",
            dependencies: ["RunnerKinds", "RunnerKit", "FixtureServer", "RunnerTesting"],
            swiftSettings: settings
        ),
        .testTarget(name: "FixtureServerTests", dependencies: ["FixtureServer", "RunnerTestSupport"], swiftSettings: settings),
        .testTarget(
            name: "RunnerTests",
            dependencies: ["runner", "RunnerKit", "RunnerKinds", "FixtureServer", "RunnerTestSupport"],
            swiftSettings: settings
        ),
    ],
    swiftLanguageModes: [.v6]
)
