// The one storage account: the Functions host's own state, the deployment package, and the app's
// tables, containers and contact queues. Only Entra ID tokens open it: shared keys are disabled.
param name string
param location string
param tags object

@description('Blob containers to create (the deployment package, bundles, receipts).')
param containerNames array

// The longest queue name made from the prefix, `<prefix>-poison`, stays within Azure's 63 characters.
@minLength(3)
@maxLength(56)
@description('STOREFRONT_CONTACT_QUEUE: the contact queues\' name prefix.')
param contactQueuePrefix string

@minValue(1)
@maxValue(32)
@description('STOREFRONT_CONTACT_QUEUE_SHARDS: how many contact queues the purchases spread over.')
param contactQueueShards int

resource storage 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: name
  location: location
  tags: tags
  // General-purpose v2 without a hierarchical namespace: the receipts container uses blob index
  // tags, which accounts with a hierarchical namespace do not offer.
  kind: 'StorageV2'
  sku: {
    name: 'Standard_LRS'
  }
  properties: {
    isHnsEnabled: false
    allowSharedKeyAccess: false
    defaultToOAuthAuthentication: true
    allowBlobPublicAccess: false
    allowCrossTenantReplication: false
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

resource containers 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = [
  for containerName in containerNames: {
    parent: blobService
    name: containerName
    properties: {
      publicAccess: 'None'
    }
  }
]

resource queueService 'Microsoft.Storage/storageAccounts/queueServices@2023-05-01' = {
  parent: storage
  name: 'default'
}

// The contact queues, `<prefix>-0` to `<prefix>-<shards-1>`: each purchase puts its buyer, encrypted,
// on one of them (one queue's target is 2,000 messages a second), and a timer drains them into Brevo.
resource contactQueues 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = [
  for shard in range(0, contactQueueShards): {
    parent: queueService
    name: '${contactQueuePrefix}-${shard}'
  }
]

// The messages the drainer gives up on (one it can no longer decrypt, say), kept to look at.
resource contactPoisonQueue 'Microsoft.Storage/storageAccounts/queueServices/queues@2023-05-01' = {
  parent: queueService
  name: '${contactQueuePrefix}-poison'
}

output name string = storage.name
