# Convenience targets; the real build is CMake (see README).
.PHONY: all build test demo demo-failover demo-cluster fault bench clean deb
all build:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build -j $$(nproc)
test:
	./scripts/test.sh
demo:
	./scripts/demo.sh
demo-failover:
	DEMO_FAILOVER=1 ./scripts/demo.sh
demo-cluster:
	DEMO_CLUSTER=1 ./scripts/demo.sh
fault:
	./scripts/fault.sh
bench:
	./scripts/bench.sh
deb: build
	cmake --build build --target package
clean:
	rm -rf build build-asan build-tsan build-rel
