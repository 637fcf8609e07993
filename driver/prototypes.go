package driver

// The driver entry points the binding calls, one //cuda line each: the
// single source of truth for them. go generate ./driver runs mkdriver
// (internal/mkdriver), which turns the list into the symID constants and
// the symbol table (zsymbols.go), one typed wrapper per entry point
// (zcalls.go), and the list of entry points that the fake driver must
// export (internal/fakecuda/src/zexports.h). make test fails when those
// are stale. README.md says how to add a call.
//
// A line reads
//
//	//cuda NAME(PARAMS) = EXPORT VERSION [MARK]
//
//   - NAME is the plain CUDA name, the one cuGetProcAddress takes. It names
//     the wrapper too (cuMemAlloc), and its symID (symMemAlloc).
//   - PARAMS are the C parameters of cuda.h's prototype, in order, as Go
//     parameters: uintptr for handles, sizes (size_t) and host addresses
//     the binding holds as integers (pinned or C memory); DevicePtr for a
//     CUdeviceptr; int32 or uint32 (or a named integer type) for int and
//     unsigned int; a pointer to Go memory as *T. The wrapper converts
//     each to a uintptr: that is the only place where a driver call's
//     arguments are packed.
//   - EXPORT is the name the library exports: cuda.h maps some plain names
//     to versioned ones (cuMemAlloc to cuMemAlloc_v2).
//   - VERSION is the CUDA version, 1000*major + 10*minor, whose ABI the
//     binding binds, handed to cuGetProcAddress_v2: the version in which
//     the export it names first appeared (cudaTypedefs.h's PFN_..._vNNNNN).
//   - MARK picks the call path, and so the wrapper's signature:
//     none: call (purego.SyscallN); func(PARAMS) error. Go memory that a
//     pointer argument points to is kept alive, and moved to the heap, for
//     the call (go:uintptrescapes).
//     hot: callScratch, through the caller's scratch, allocating nothing;
//     func(sc *scratch, PARAMS) error. Pointer arguments must point at
//     memory that does not move: sc itself, heap, pinned or C memory.
//     direct: as hot, and through callCDirect when direct is set
//     ([BindOptions].DirectCalls); func(sc *scratch, direct bool, PARAMS)
//     error. Only for calls that never wait for the device.
//     raw: syscallN on an entry point that the caller resolved, the
//     CUresult unchecked; func(entry uintptr, PARAMS) Result. For calls
//     made before the table can be used, or whose failure is an answer.
//     nowrap: a row of the table and an export of the fake, no wrapper:
//     package loader calls it itself.
//
//go:generate go run ./internal/mkdriver

// Initialisation, versions and error strings.

//cuda cuInit(flags uint32) = cuInit 2000 raw
//cuda cuDriverGetVersion(driverVersion *int32) = cuDriverGetVersion 2020 nowrap
//cuda cuGetErrorName(code Result, pStr *uintptr) = cuGetErrorName 6000 raw
//cuda cuGetErrorString(code Result, pStr *uintptr) = cuGetErrorString 6000 raw

// Devices and primary contexts (device.go, context.go, wait.go).

//cuda cuDeviceGet(device *int32, ordinal int32) = cuDeviceGet 2000
//cuda cuDeviceGetCount(count *int32) = cuDeviceGetCount 2000
//cuda cuDeviceGetName(name *byte, length int32, dev int32) = cuDeviceGetName 2000
//cuda cuDeviceGetAttribute(pi *int32, attrib DeviceAttribute, dev int32) = cuDeviceGetAttribute 2000
//cuda cuDeviceTotalMem(bytes *uint64, dev int32) = cuDeviceTotalMem_v2 3020
//cuda cuDeviceGetPCIBusId(pciBusId *byte, length int32, dev int32) = cuDeviceGetPCIBusId 4010
//cuda cuDevicePrimaryCtxRetain(pctx *uintptr, dev int32) = cuDevicePrimaryCtxRetain 7000
//cuda cuDevicePrimaryCtxRelease(dev int32) = cuDevicePrimaryCtxRelease_v2 11000
//cuda cuDevicePrimaryCtxGetState(dev int32, flags *uint32, active *int32) = cuDevicePrimaryCtxGetState 7000
//cuda cuDevicePrimaryCtxSetFlags(dev int32, flags uint32) = cuDevicePrimaryCtxSetFlags_v2 11000
//cuda cuCtxSetCurrent(ctx uintptr) = cuCtxSetCurrent 4000 hot
//cuda cuCtxGetCurrent(pctx *uintptr) = cuCtxGetCurrent 4000 hot
//cuda cuCtxSynchronize() = cuCtxSynchronize 2000

// Memory and copies (memory.go, stream.go).

//cuda cuMemGetInfo(free *uint64, total *uint64) = cuMemGetInfo_v2 3020
//cuda cuMemAlloc(dptr *DevicePtr, bytesize uintptr) = cuMemAlloc_v2 3020
//cuda cuMemFree(dptr DevicePtr) = cuMemFree_v2 3020
//cuda cuMemHostAlloc(pp *uintptr, bytesize uintptr, flags uint32) = cuMemHostAlloc 2020
//cuda cuMemFreeHost(p uintptr) = cuMemFreeHost 2000
//cuda cuMemHostRegister(p *byte, bytesize uintptr, flags uint32) = cuMemHostRegister_v2 6050
//cuda cuMemHostUnregister(p uintptr) = cuMemHostUnregister 4000
//cuda cuMemcpyHtoD(dstDevice DevicePtr, srcHost *byte, byteCount uintptr) = cuMemcpyHtoD_v2 3020
//cuda cuMemcpyDtoH(dstHost *byte, srcDevice DevicePtr, byteCount uintptr) = cuMemcpyDtoH_v2 3020
//cuda cuMemcpyDtoD(dstDevice DevicePtr, srcDevice DevicePtr, byteCount uintptr) = cuMemcpyDtoD_v2 3020
//cuda cuMemcpyHtoDAsync(dstDevice DevicePtr, srcHost uintptr, byteCount uintptr, hStream uintptr) = cuMemcpyHtoDAsync_v2 3020 direct
//cuda cuMemcpyDtoHAsync(dstHost uintptr, srcDevice DevicePtr, byteCount uintptr, hStream uintptr) = cuMemcpyDtoHAsync_v2 3020 direct
//cuda cuMemcpyDtoDAsync(dstDevice DevicePtr, srcDevice DevicePtr, byteCount uintptr, hStream uintptr) = cuMemcpyDtoDAsync_v2 3020 hot
//cuda cuMemsetD8(dstDevice DevicePtr, uc uint8, n uintptr) = cuMemsetD8_v2 3020
//cuda cuMemsetD8Async(dstDevice DevicePtr, uc uint8, n uintptr, hStream uintptr) = cuMemsetD8Async 3020 hot
//cuda cuMemsetD16(dstDevice DevicePtr, us uint16, n uintptr) = cuMemsetD16_v2 3020
//cuda cuMemsetD32(dstDevice DevicePtr, ui uint32, n uintptr) = cuMemsetD32_v2 3020
//cuda cuMemsetD16Async(dstDevice DevicePtr, us uint16, n uintptr, hStream uintptr) = cuMemsetD16Async 3020 hot
//cuda cuMemsetD32Async(dstDevice DevicePtr, ui uint32, n uintptr, hStream uintptr) = cuMemsetD32Async 3020 hot

// 2D and 3D copies (copy2d.go). The CUDA_MEMCPY2D or CUDA_MEMCPY3D is Go
// memory that the driver reads during the call.

//cuda cuMemcpy2D(pCopy *memcpy2D) = cuMemcpy2D_v2 3020
//cuda cuMemcpy2DAsync(pCopy *memcpy2D, hStream uintptr) = cuMemcpy2DAsync_v2 3020
//cuda cuMemcpy3D(pCopy *memcpy3D) = cuMemcpy3D_v2 3020
//cuda cuMemcpy3DAsync(pCopy *memcpy3D, hStream uintptr) = cuMemcpy3DAsync_v2 3020

// Peer access and copies between devices' contexts (peer.go).

//cuda cuDeviceCanAccessPeer(canAccessPeer *int32, dev int32, peerDev int32) = cuDeviceCanAccessPeer 4000
//cuda cuCtxEnablePeerAccess(peerContext uintptr, flags uint32) = cuCtxEnablePeerAccess 4000
//cuda cuCtxDisablePeerAccess(peerContext uintptr) = cuCtxDisablePeerAccess 4000
//cuda cuMemcpyPeer(dstDevice DevicePtr, dstContext uintptr, srcDevice DevicePtr, srcContext uintptr, byteCount uintptr) = cuMemcpyPeer 4000
//cuda cuMemcpyPeerAsync(dstDevice DevicePtr, dstContext uintptr, srcDevice DevicePtr, srcContext uintptr, byteCount uintptr, hStream uintptr) = cuMemcpyPeerAsync 4000

// Managed memory (managed.go). A CUmemLocation, {int type; int id}, is
// passed by value, in one register: a uint64, type in the low half.

//cuda cuMemAllocManaged(dptr *DevicePtr, bytesize uintptr, flags uint32) = cuMemAllocManaged 6000
//cuda cuMemAdvise(devPtr DevicePtr, count uintptr, advice int32, location uint64) = cuMemAdvise_v2 12020
//cuda cuMemPrefetchAsync(devPtr DevicePtr, count uintptr, location uint64, flags uint32, hStream uintptr) = cuMemPrefetchAsync_v2 12020
//cuda cuMemRangeGetAttribute(data *int32, dataSize uintptr, attribute int32, devPtr DevicePtr, count uintptr) = cuMemRangeGetAttribute 8000

// Virtual memory management (vmm.go).

//cuda cuMemGetAllocationGranularity(granularity *uintptr, prop *memAllocationProp, option int32) = cuMemGetAllocationGranularity 10020
//cuda cuMemCreate(handle *uint64, size uintptr, prop *memAllocationProp, flags uint64) = cuMemCreate 10020
//cuda cuMemRelease(handle uint64) = cuMemRelease 10020
//cuda cuMemAddressReserve(ptr *DevicePtr, size uintptr, alignment uintptr, addr DevicePtr, flags uint64) = cuMemAddressReserve 10020
//cuda cuMemAddressFree(ptr DevicePtr, size uintptr) = cuMemAddressFree 10020
//cuda cuMemMap(ptr DevicePtr, size uintptr, offset uintptr, handle uint64, flags uint64) = cuMemMap 10020
//cuda cuMemUnmap(ptr DevicePtr, size uintptr) = cuMemUnmap 10020
//cuda cuMemSetAccess(ptr DevicePtr, size uintptr, desc *memAccessDesc, count uintptr) = cuMemSetAccess 10020

// Interprocess memory and events (ipc.go). cuIpcOpenMemHandle_v2 and
// cuIpcOpenEventHandle take a 64-byte handle by value: their prototypes
// name the argument words that the platform's ABI puts it in, which
// byValue64 lays out (ipc_sysv.go, ipc_byref.go).

//cuda cuIpcGetMemHandle(pHandle *IPCMemHandle, dptr DevicePtr) = cuIpcGetMemHandle 4010
//cuda cuIpcOpenMemHandle(pdptr *DevicePtr, w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12 uintptr) = cuIpcOpenMemHandle_v2 11000
//cuda cuIpcCloseMemHandle(dptr DevicePtr) = cuIpcCloseMemHandle 4010
//cuda cuIpcGetEventHandle(pHandle *IPCEventHandle, event uintptr) = cuIpcGetEventHandle 4010
//cuda cuIpcOpenEventHandle(phEvent *uintptr, w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12 uintptr) = cuIpcOpenEventHandle 4010
//cuda cuMemGetAddressRange(pbase *DevicePtr, psize *uintptr, dptr DevicePtr) = cuMemGetAddressRange_v2 3020

// Batched copies (batch.go), CUDA 13.0's cuMemcpyBatchAsync_v2 (without
// 12.8's failIdx). The arrays and the attributes are Go memory that the
// driver reads during the call.

//cuda cuMemcpyBatchAsync(dsts *DevicePtr, srcs *DevicePtr, sizes *uintptr, count uintptr, attrs *memcpyAttributes, attrsIdxs *uintptr, numAttrs uintptr, hStream uintptr) = cuMemcpyBatchAsync_v2 13000

// Streams and events (stream.go, event.go).

//cuda cuStreamCreate(phStream *uintptr, flags uint32) = cuStreamCreate 2000
//cuda cuStreamCreateWithPriority(phStream *uintptr, flags uint32, priority int32) = cuStreamCreateWithPriority 5050
//cuda cuStreamDestroy(hStream uintptr) = cuStreamDestroy_v2 4000
//cuda cuStreamSynchronize(hStream uintptr) = cuStreamSynchronize 2000 hot
//cuda cuStreamQuery(hStream uintptr) = cuStreamQuery 2000 hot
//cuda cuStreamWaitEvent(hStream uintptr, hEvent uintptr, flags uint32) = cuStreamWaitEvent 3020 direct
//cuda cuEventCreate(phEvent *uintptr, flags uint32) = cuEventCreate 2000
//cuda cuEventDestroy(hEvent uintptr) = cuEventDestroy_v2 4000
//cuda cuEventRecord(hEvent uintptr, hStream uintptr) = cuEventRecord 2000 direct
//cuda cuEventQuery(hEvent uintptr) = cuEventQuery 2000 hot
//cuda cuEventSynchronize(hEvent uintptr) = cuEventSynchronize 2000 hot
//cuda cuEventElapsedTime(pMilliseconds *float32, hStart uintptr, hEnd uintptr) = cuEventElapsedTime_v2 12080 hot

// Modules and launches (module.go, launch.go). cuLaunchKernel's grid,
// block and shared memory sizes are unsigned ints, passed as uintptrs (the
// register they travel in): their conversions would make its wrapper too
// costly for the compiler to inline into Function.launch (BenchmarkFake).

//cuda cuModuleLoadDataEx(module *uintptr, image *byte, numOptions uint32, options *int32, optionValues *uintptr) = cuModuleLoadDataEx 2010
//cuda cuModuleUnload(hmod uintptr) = cuModuleUnload 2000
//cuda cuModuleGetFunction(hfunc *uintptr, hmod uintptr, name *byte) = cuModuleGetFunction 2000
//cuda cuFuncGetAttribute(pi *int32, attrib FunctionAttribute, hfunc uintptr) = cuFuncGetAttribute 2020
//cuda cuFuncGetParamInfo(hfunc uintptr, paramIndex uintptr, paramOffset *uint64, paramSize *uint64) = cuFuncGetParamInfo 12040
//cuda cuLaunchKernel(f uintptr, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes uintptr, hStream uintptr, kernelParams *unsafe.Pointer, extra *unsafe.Pointer) = cuLaunchKernel 4000 direct

// Module images, the JIT linker, libraries, extended and cooperative
// launches, occupancy and host functions (image.go, link.go, library.go,
// launchex.go, occupancy.go, hostfunc.go). cuLaunchCooperativeKernel's
// sizes are uintptrs, as cuLaunchKernel's are.

//cuda cuModuleLoadData(module *uintptr, image *byte) = cuModuleLoadData 2000
//cuda cuModuleLoadFatBinary(module *uintptr, fatCubin *byte) = cuModuleLoadFatBinary 2000
//cuda cuLinkCreate(numOptions uint32, options *int32, optionValues *uintptr, stateOut *uintptr) = cuLinkCreate_v2 6050
//cuda cuLinkAddData(state uintptr, typ int32, data *byte, size uintptr, name *byte, numOptions uint32, options *int32, optionValues *uintptr) = cuLinkAddData_v2 6050
//cuda cuLinkComplete(state uintptr, cubinOut *uintptr, sizeOut *uintptr) = cuLinkComplete 5050
//cuda cuLinkDestroy(state uintptr) = cuLinkDestroy 5050
//cuda cuLibraryLoadData(library *uintptr, code *byte, jitOptions *int32, jitOptionsValues *uintptr, numJitOptions uint32, libraryOptions *int32, libraryOptionValues *uintptr, numLibraryOptions uint32) = cuLibraryLoadData 12000
//cuda cuLibraryUnload(library uintptr) = cuLibraryUnload 12000
//cuda cuLibraryGetKernel(pKernel *uintptr, library uintptr, name *byte) = cuLibraryGetKernel 12000
//cuda cuLibraryGetModule(pMod *uintptr, library uintptr) = cuLibraryGetModule 12000
//cuda cuKernelGetFunction(pFunc *uintptr, kernel uintptr) = cuKernelGetFunction 12000
//cuda cuLaunchKernelEx(config *launchConfig, f uintptr, kernelParams *unsafe.Pointer, extra *unsafe.Pointer) = cuLaunchKernelEx 11060 hot
//cuda cuLaunchCooperativeKernel(f uintptr, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes uintptr, hStream uintptr, kernelParams *unsafe.Pointer) = cuLaunchCooperativeKernel 9000 hot
//cuda cuOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks *int32, f uintptr, blockSize int32, dynamicSMemSize uintptr) = cuOccupancyMaxActiveBlocksPerMultiprocessor 6050
//cuda cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(numBlocks *int32, f uintptr, blockSize int32, dynamicSMemSize uintptr, flags uint32) = cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags 7000
//cuda cuOccupancyMaxPotentialBlockSize(minGridSize *int32, blockSize *int32, f uintptr, blockSizeToDynamicSMemSize uintptr, dynamicSMemSize uintptr, blockSizeLimit int32) = cuOccupancyMaxPotentialBlockSize 6050
//cuda cuOccupancyMaxPotentialBlockSizeWithFlags(minGridSize *int32, blockSize *int32, f uintptr, blockSizeToDynamicSMemSize uintptr, dynamicSMemSize uintptr, blockSizeLimit int32, flags uint32) = cuOccupancyMaxPotentialBlockSizeWithFlags 7000
//cuda cuOccupancyAvailableDynamicSMemPerBlock(dynamicSmemSize *uintptr, f uintptr, numBlocks int32, blockSize int32) = cuOccupancyAvailableDynamicSMemPerBlock 10020
//cuda cuOccupancyMaxPotentialClusterSize(clusterSize *int32, f uintptr, config *launchConfig) = cuOccupancyMaxPotentialClusterSize 11070
//cuda cuOccupancyMaxActiveClusters(numClusters *int32, f uintptr, config *launchConfig) = cuOccupancyMaxActiveClusters 11070
//cuda cuLaunchHostFunc(hStream uintptr, fn uintptr, userData uintptr) = cuLaunchHostFunc 10000 hot

// Stream-ordered allocation (pool.go). The pool attributes the binding
// sets and reads are cuuint64_t: the value pointer is a *uint64.

//cuda cuMemAllocAsync(dptr *DevicePtr, bytesize uintptr, hStream uintptr) = cuMemAllocAsync 11020
//cuda cuMemFreeAsync(dptr DevicePtr, hStream uintptr) = cuMemFreeAsync 11020
//cuda cuMemAllocFromPoolAsync(dptr *DevicePtr, bytesize uintptr, pool uintptr, hStream uintptr) = cuMemAllocFromPoolAsync 11020
//cuda cuMemPoolCreate(pool *uintptr, poolProps *memPoolProps) = cuMemPoolCreate 11020
//cuda cuMemPoolDestroy(pool uintptr) = cuMemPoolDestroy 11020
//cuda cuMemPoolSetAttribute(pool uintptr, attr int32, value *uint64) = cuMemPoolSetAttribute 11020
//cuda cuMemPoolGetAttribute(pool uintptr, attr int32, value *uint64) = cuMemPoolGetAttribute 11020
//cuda cuDeviceGetDefaultMemPool(poolOut *uintptr, dev int32) = cuDeviceGetDefaultMemPool 11020

// Stream capture and graphs (graph.go).

//cuda cuStreamBeginCapture(hStream uintptr, mode int32) = cuStreamBeginCapture_v2 10010 hot
//cuda cuStreamEndCapture(hStream uintptr, phGraph *uintptr) = cuStreamEndCapture 10000
//cuda cuStreamIsCapturing(hStream uintptr, captureStatus *int32) = cuStreamIsCapturing 10000
//cuda cuGraphInstantiateWithFlags(phGraphExec *uintptr, hGraph uintptr, flags uint64) = cuGraphInstantiateWithFlags 11040
//cuda cuGraphLaunch(hGraphExec uintptr, hStream uintptr) = cuGraphLaunch 10000 direct
//cuda cuGraphExecUpdate(hGraphExec uintptr, hGraph uintptr, resultInfo *graphExecUpdateResultInfo) = cuGraphExecUpdate_v2 12000
//cuda cuGraphExecDestroy(hGraphExec uintptr) = cuGraphExecDestroy 10000
//cuda cuGraphDestroy(hGraph uintptr) = cuGraphDestroy 10000

// Graphs built node by node (graphnode.go).

//cuda cuGraphCreate(phGraph *uintptr, flags uint32) = cuGraphCreate 10000
//cuda cuGraphAddKernelNode(phGraphNode *uintptr, hGraph uintptr, dependencies *uintptr, numDependencies uintptr, nodeParams *kernelNodeParams) = cuGraphAddKernelNode_v2 12000
//cuda cuGraphAddMemcpyNode(phGraphNode *uintptr, hGraph uintptr, dependencies *uintptr, numDependencies uintptr, copyParams *memcpy3D, ctx uintptr) = cuGraphAddMemcpyNode 10000
//cuda cuGraphExecKernelNodeSetParams(hGraphExec uintptr, hNode uintptr, nodeParams *kernelNodeParams) = cuGraphExecKernelNodeSetParams_v2 12000
//cuda cuGraphExecMemcpyNodeSetParams(hGraphExec uintptr, hNode uintptr, copyParams *memcpy3D, ctx uintptr) = cuGraphExecMemcpyNodeSetParams 10020
