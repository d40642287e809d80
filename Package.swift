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
        .executable(name: "runner", targets: ["runner"]),
    ],
    targets: [
        .target(name: "RunnerKit", swiftSettings: settings),
        .target(name: "RunnerKinds", dependencies: ["RunnerKit"], swiftSettings: settings),
        .target(name: "FixtureServer", swiftSettings: settings),
        .executableTarget(
            name: "runner",
            dependencies: ["RunnerKit", "RunnerKinds", "FixtureServer"],
            swiftSettings: settings
        ),
        // Doubles and clocks shared by the test targets (a test clock, a recording HTTP client,
        // a scripted connectivity monitor, a gate), the processes they start, and how their
        // suites share the machine when they run in parallel.
        .target(
            name: "RunnerTestSupport", dependencies: ["RunnerKit"], path: "Tests/RunnerTestSupport", swiftSettings: settings
        ),
        .testTarget(name: "RunnerKitTests", dependencies: ["RunnerKit", "RunnerTestSupport"], swiftSettings: settings),
        .testTarget(
            name: "RunnerKindsTests",
            dependencies: ["RunnerKinds", "RunnerKit", "FixtureServer"],
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
