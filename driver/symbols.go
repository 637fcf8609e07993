package driver

import "github.com/purecuda/overlap/loader"

// symID indexes the symbol table. Each entry point the binding uses has
// exactly one row in symbols, and every call goes through that row.
type symID int

const (
	symInit symID = iota
	symDriverGetVersion
	symGetErrorName
	symGetErrorString
	symDeviceGet
	symDeviceGetCount
	symDeviceGetName
	symDeviceGetAttribute
	symDeviceTotalMem
	symDeviceGetPCIBusId
	symDevicePrimaryCtxRetain
	symDevicePrimaryCtxRelease
	symDevicePrimaryCtxGetState
	symDevicePrimaryCtxSetFlags
	symCtxSetCurrent
	symCtxGetCurrent
	symCtxSynchronize
	symMemGetInfo
	symMemAlloc
	symMemFree
	symMemHostAlloc
	symMemFreeHost
	symMemHostRegister
	symMemHostUnregister
	symMemcpyHtoD
	symMemcpyDtoH
	symMemcpyDtoD
	symMemcpyHtoDAsync
	symMemcpyDtoHAsync
	symMemcpyDtoDAsync
	symMemsetD8
	symMemsetD8Async
	symStreamCreate
	symStreamCreateWithPriority
	symStreamDestroy
	symStreamSynchronize
	symStreamQuery
	symStreamWaitEvent
	symEventCreate
	symEventDestroy
	symEventRecord
	symEventQuery
	symEventSynchronize
	symEventElapsedTime
	symModuleLoadDataEx
	symModuleUnload
	symModuleGetFunction
	symFuncGetAttribute
	symFuncGetParamInfo
	symLaunchKernel
	symMemAllocAsync
	symMemFreeAsync
	symMemAllocFromPoolAsync
	symMemPoolCreate
	symMemPoolDestroy
	symMemPoolSetAttribute
	symMemPoolGetAttribute
	symDeviceGetDefaultMemPool
	symStreamBeginCapture
	symStreamEndCapture
	symStreamIsCapturing
	symGraphInstantiate
	symGraphLaunch
	symGraphExecUpdate
	symGraphExecDestroy
	symGraphDestroy
	symGraphCreate
	symGraphAddKernelNode
	symGraphAddMemcpyNode
	symGraphExecKernelNodeSetParams
	symGraphExecMemcpyNodeSetParams
	numSymbols
)

// symbol is one row of the table: how to resolve the entry point and how
// many arguments it takes (its C prototype in NVIDIA's cuda.h).
type symbol struct {
	loader.Symbol
	Args int
}

// symbols is the single source of truth for the driver entry points the
// binding calls: the plain name handed to cuGetProcAddress, the CUDA version
// whose ABI we bind, the versioned export name for drivers without
// cuGetProcAddress_v2, and the number of arguments. Error messages name
// Export; tests check the table's shape.
var symbols = [numSymbols]symbol{
	symInit:                     {loader.Symbol{Name: "cuInit", Version: 2000, Export: "cuInit"}, 1},
	symDriverGetVersion:         {loader.Symbol{Name: "cuDriverGetVersion", Version: 2020, Export: "cuDriverGetVersion"}, 1},
	symGetErrorName:             {loader.Symbol{Name: "cuGetErrorName", Version: 6000, Export: "cuGetErrorName"}, 2},
	symGetErrorString:           {loader.Symbol{Name: "cuGetErrorString", Version: 6000, Export: "cuGetErrorString"}, 2},
	symDeviceGet:                {loader.Symbol{Name: "cuDeviceGet", Version: 2000, Export: "cuDeviceGet"}, 2},
	symDeviceGetCount:           {loader.Symbol{Name: "cuDeviceGetCount", Version: 2000, Export: "cuDeviceGetCount"}, 1},
	symDeviceGetName:            {loader.Symbol{Name: "cuDeviceGetName", Version: 2000, Export: "cuDeviceGetName"}, 3},
	symDeviceGetAttribute:       {loader.Symbol{Name: "cuDeviceGetAttribute", Version: 2000, Export: "cuDeviceGetAttribute"}, 3},
	symDeviceTotalMem:           {loader.Symbol{Name: "cuDeviceTotalMem", Version: 3020, Export: "cuDeviceTotalMem_v2"}, 2},
	symDeviceGetPCIBusId:        {loader.Symbol{Name: "cuDeviceGetPCIBusId", Version: 4010, Export: "cuDeviceGetPCIBusId"}, 3},
	symDevicePrimaryCtxRetain:   {loader.Symbol{Name: "cuDevicePrimaryCtxRetain", Version: 7000, Export: "cuDevicePrimaryCtxRetain"}, 2},
	symDevicePrimaryCtxRelease:  {loader.Symbol{Name: "cuDevicePrimaryCtxRelease", Version: 11000, Export: "cuDevicePrimaryCtxRelease_v2"}, 1},
	symDevicePrimaryCtxGetState: {loader.Symbol{Name: "cuDevicePrimaryCtxGetState", Version: 7000, Export: "cuDevicePrimaryCtxGetState"}, 3},
	symDevicePrimaryCtxSetFlags: {loader.Symbol{Name: "cuDevicePrimaryCtxSetFlags", Version: 11000, Export: "cuDevicePrimaryCtxSetFlags_v2"}, 2},
	symCtxSetCurrent:            {loader.Symbol{Name: "cuCtxSetCurrent", Version: 4000, Export: "cuCtxSetCurrent"}, 1},
	symCtxGetCurrent:            {loader.Symbol{Name: "cuCtxGetCurrent", Version: 4000, Export: "cuCtxGetCurrent"}, 1},
	symCtxSynchronize:           {loader.Symbol{Name: "cuCtxSynchronize", Version: 2000, Export: "cuCtxSynchronize"}, 0},
	symMemGetInfo:               {loader.Symbol{Name: "cuMemGetInfo", Version: 3020, Export: "cuMemGetInfo_v2"}, 2},
	symMemAlloc:                 {loader.Symbol{Name: "cuMemAlloc", Version: 3020, Export: "cuMemAlloc_v2"}, 2},
	symMemFree:                  {loader.Symbol{Name: "cuMemFree", Version: 3020, Export: "cuMemFree_v2"}, 1},
	symMemHostAlloc:             {loader.Symbol{Name: "cuMemHostAlloc", Version: 2020, Export: "cuMemHostAlloc"}, 3},
	symMemFreeHost:              {loader.Symbol{Name: "cuMemFreeHost", Version: 2000, Export: "cuMemFreeHost"}, 1},
	symMemHostRegister:          {loader.Symbol{Name: "cuMemHostRegister", Version: 6050, Export: "cuMemHostRegister_v2"}, 3},
	symMemHostUnregister:        {loader.Symbol{Name: "cuMemHostUnregister", Version: 4000, Export: "cuMemHostUnregister"}, 1},
	symMemcpyHtoD:               {loader.Symbol{Name: "cuMemcpyHtoD", Version: 3020, Export: "cuMemcpyHtoD_v2"}, 3},
	symMemcpyDtoH:               {loader.Symbol{Name: "cuMemcpyDtoH", Version: 3020, Export: "cuMemcpyDtoH_v2"}, 3},
	symMemcpyDtoD:               {loader.Symbol{Name: "cuMemcpyDtoD", Version: 3020, Export: "cuMemcpyDtoD_v2"}, 3},
	symMemcpyHtoDAsync:          {loader.Symbol{Name: "cuMemcpyHtoDAsync", Version: 3020, Export: "cuMemcpyHtoDAsync_v2"}, 4},
	symMemcpyDtoHAsync:          {loader.Symbol{Name: "cuMemcpyDtoHAsync", Version: 3020, Export: "cuMemcpyDtoHAsync_v2"}, 4},
	symMemcpyDtoDAsync:          {loader.Symbol{Name: "cuMemcpyDtoDAsync", Version: 3020, Export: "cuMemcpyDtoDAsync_v2"}, 4},
	symMemsetD8:                 {loader.Symbol{Name: "cuMemsetD8", Version: 3020, Export: "cuMemsetD8_v2"}, 3},
	symMemsetD8Async:            {loader.Symbol{Name: "cuMemsetD8Async", Version: 3020, Export: "cuMemsetD8Async"}, 4},
	symStreamCreate:             {loader.Symbol{Name: "cuStreamCreate", Version: 2000, Export: "cuStreamCreate"}, 2},
	symStreamCreateWithPriority: {loader.Symbol{Name: "cuStreamCreateWithPriority", Version: 5050, Export: "cuStreamCreateWithPriority"}, 3},
	symStreamDestroy:            {loader.Symbol{Name: "cuStreamDestroy", Version: 4000, Export: "cuStreamDestroy_v2"}, 1},
	symStreamSynchronize:        {loader.Symbol{Name: "cuStreamSynchronize", Version: 2000, Export: "cuStreamSynchronize"}, 1},
	symStreamQuery:              {loader.Symbol{Name: "cuStreamQuery", Version: 2000, Export: "cuStreamQuery"}, 1},
	symStreamWaitEvent:          {loader.Symbol{Name: "cuStreamWaitEvent", Version: 3020, Export: "cuStreamWaitEvent"}, 3},
	symEventCreate:              {loader.Symbol{Name: "cuEventCreate", Version: 2000, Export: "cuEventCreate"}, 2},
	symEventDestroy:             {loader.Symbol{Name: "cuEventDestroy", Version: 4000, Export: "cuEventDestroy_v2"}, 1},
	symEventRecord:              {loader.Symbol{Name: "cuEventRecord", Version: 2000, Export: "cuEventRecord"}, 2},
	symEventQuery:               {loader.Symbol{Name: "cuEventQuery", Version: 2000, Export: "cuEventQuery"}, 1},
	symEventSynchronize:         {loader.Symbol{Name: "cuEventSynchronize", Version: 2000, Export: "cuEventSynchronize"}, 1},
	symEventElapsedTime:         {loader.Symbol{Name: "cuEventElapsedTime", Version: 12080, Export: "cuEventElapsedTime_v2"}, 3},
	symModuleLoadDataEx:         {loader.Symbol{Name: "cuModuleLoadDataEx", Version: 2010, Export: "cuModuleLoadDataEx"}, 5},
	symModuleUnload:             {loader.Symbol{Name: "cuModuleUnload", Version: 2000, Export: "cuModuleUnload"}, 1},
	symModuleGetFunction:        {loader.Symbol{Name: "cuModuleGetFunction", Version: 2000, Export: "cuModuleGetFunction"}, 3},
	symFuncGetAttribute:         {loader.Symbol{Name: "cuFuncGetAttribute", Version: 2020, Export: "cuFuncGetAttribute"}, 3},
	symFuncGetParamInfo:         {loader.Symbol{Name: "cuFuncGetParamInfo", Version: 12040, Export: "cuFuncGetParamInfo"}, 4},
	symLaunchKernel:             {loader.Symbol{Name: "cuLaunchKernel", Version: 4000, Export: "cuLaunchKernel"}, 11},
	// Stream-ordered allocation (pool.go).
	symMemAllocAsync:           {loader.Symbol{Name: "cuMemAllocAsync", Version: 11020, Export: "cuMemAllocAsync"}, 3},
	symMemFreeAsync:            {loader.Symbol{Name: "cuMemFreeAsync", Version: 11020, Export: "cuMemFreeAsync"}, 2},
	symMemAllocFromPoolAsync:   {loader.Symbol{Name: "cuMemAllocFromPoolAsync", Version: 11020, Export: "cuMemAllocFromPoolAsync"}, 4},
	symMemPoolCreate:           {loader.Symbol{Name: "cuMemPoolCreate", Version: 11020, Export: "cuMemPoolCreate"}, 2},
	symMemPoolDestroy:          {loader.Symbol{Name: "cuMemPoolDestroy", Version: 11020, Export: "cuMemPoolDestroy"}, 1},
	symMemPoolSetAttribute:     {loader.Symbol{Name: "cuMemPoolSetAttribute", Version: 11020, Export: "cuMemPoolSetAttribute"}, 3},
	symMemPoolGetAttribute:     {loader.Symbol{Name: "cuMemPoolGetAttribute", Version: 11020, Export: "cuMemPoolGetAttribute"}, 3},
	symDeviceGetDefaultMemPool: {loader.Symbol{Name: "cuDeviceGetDefaultMemPool", Version: 11020, Export: "cuDeviceGetDefaultMemPool"}, 2},
	// Stream capture and graphs (graph.go).
	symStreamBeginCapture: {loader.Symbol{Name: "cuStreamBeginCapture", Version: 10010, Export: "cuStreamBeginCapture_v2"}, 2},
	symStreamEndCapture:   {loader.Symbol{Name: "cuStreamEndCapture", Version: 10000, Export: "cuStreamEndCapture"}, 2},
	symStreamIsCapturing:  {loader.Symbol{Name: "cuStreamIsCapturing", Version: 10000, Export: "cuStreamIsCapturing"}, 2},
	symGraphInstantiate:   {loader.Symbol{Name: "cuGraphInstantiateWithFlags", Version: 11040, Export: "cuGraphInstantiateWithFlags"}, 3},
	symGraphLaunch:        {loader.Symbol{Name: "cuGraphLaunch", Version: 10000, Export: "cuGraphLaunch"}, 2},
	symGraphExecUpdate:    {loader.Symbol{Name: "cuGraphExecUpdate", Version: 12000, Export: "cuGraphExecUpdate_v2"}, 3},
	symGraphExecDestroy:   {loader.Symbol{Name: "cuGraphExecDestroy", Version: 10000, Export: "cuGraphExecDestroy"}, 1},
	symGraphDestroy:       {loader.Symbol{Name: "cuGraphDestroy", Version: 10000, Export: "cuGraphDestroy"}, 1},
	// Graphs built node by node (graphnode.go).
	symGraphCreate:                  {loader.Symbol{Name: "cuGraphCreate", Version: 10000, Export: "cuGraphCreate"}, 2},
	symGraphAddKernelNode:           {loader.Symbol{Name: "cuGraphAddKernelNode", Version: 12000, Export: "cuGraphAddKernelNode_v2"}, 5},
	symGraphAddMemcpyNode:           {loader.Symbol{Name: "cuGraphAddMemcpyNode", Version: 10000, Export: "cuGraphAddMemcpyNode"}, 6},
	symGraphExecKernelNodeSetParams: {loader.Symbol{Name: "cuGraphExecKernelNodeSetParams", Version: 12000, Export: "cuGraphExecKernelNodeSetParams_v2"}, 3},
	symGraphExecMemcpyNodeSetParams: {loader.Symbol{Name: "cuGraphExecMemcpyNodeSetParams", Version: 10020, Export: "cuGraphExecMemcpyNodeSetParams"}, 4},
}
